// The Settings page's time-zone picker (lifebot's own script; without it the box still
// takes a town or a zone, and its list offers every zone). As a person types, the list
// offers towns too ("Porto, Portugal" with its zone), from /zones on lifebot itself.
"use strict";

(function () {
  const input = document.querySelector("input[data-suggest]");
  const list = input && document.getElementById(input.getAttribute("list"));
  if (!input || !list || !window.fetch) return;
  const everyZone = Array.from(list.options).map(function (o) { return o.value; });
  let timer = null;
  let asked = "";

  function fill(items) {
    list.textContent = "";
    items.forEach(function (item) {
      const option = document.createElement("option");
      option.value = item.value;
      if (item.zone && item.zone !== item.value) option.label = item.zone;
      list.appendChild(option);
    });
  }

  async function suggest() {
    const q = input.value.trim();
    if (q === asked) return;
    asked = q;
    if (q.length < 2) {
      fill(everyZone.map(function (z) { return { value: z }; }));
      return;
    }
    try {
      const res = await fetch("/zones?q=" + encodeURIComponent(q), { credentials: "same-origin" });
      if (!res.ok || input.value.trim() !== q) return;
      fill(await res.json());
    } catch (err) {
      // Offline or signed out: the list keeps what it had; saving still finds the town.
    }
  }

  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(suggest, 150);
  });
})();
