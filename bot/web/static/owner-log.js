// The owner page's live log tail (lifebot's own script; the page works without it).
// Every few seconds it reads /owner/log (the newest lines of every process, secrets
// already hidden) and redraws the list. Text only ever goes in as text (textContent):
// the page's Trusted Types policy forbids writing HTML from strings.
"use strict";

(function () {
  const list = document.getElementById("log-lines");
  const status = document.getElementById("log-status");
  if (!list || !status || !window.fetch) return;
  const EVERY_MS = 2000;
  let shown = "";

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function clock(iso) {
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleTimeString([], { hour12: false });
  }

  function line(l) {
    const li = el("li", "level-" + String(l.level).toLowerCase() + (l.here ? " here" : ""));
    const t = el("time", "", clock(l.at));
    t.setAttribute("datetime", l.at);
    li.appendChild(t);
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "proc", l.process));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "lvl", l.level));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "logger", l.logger));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "text", l.text));
    return li;
  }

  function draw(lines) {
    const key = lines.length ? lines[lines.length - 1].at + lines.length : "";
    if (key === shown) return;
    shown = key;
    const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
    list.replaceChildren.apply(list, lines.map(line));
    const empty = document.getElementById("log-empty");
    if (empty && lines.length) empty.remove();
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  async function poll() {
    if (document.hidden) return;
    try {
      const answer = await fetch("/owner/log", {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      const body = await answer.json();
      draw(body.lines || []);
      status.textContent = "Live: the newest lines of every process, secrets hidden; " +
        "new lines appear within a few seconds.";
    } catch (err) {
      status.textContent = "The live log stopped (" + err.message + "); reload the page.";
    }
  }

  list.scrollTop = list.scrollHeight;
  poll();
  setInterval(poll, EVERY_MS);
})();
