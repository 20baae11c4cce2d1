// The Chat page's script (lifebot's own; the page works without it as a form post).
// It sends the same form with fetch and shows the answer as it is written: the response is
// one JSON object per line (see bot/web/chat_routes.py). Text only ever goes into the page
// as text (textContent, createElement): the page's Trusted Types policy forbids HTML strings.
"use strict";

(function () {
  const log = document.querySelector("#chat-log ol.chat");
  const form = document.getElementById("write");
  const box = document.getElementById("chat-text");
  const file = document.getElementById("chat-file");
  const fileName = document.getElementById("chat-file-name");
  const status = document.getElementById("chat-status");
  if (!log || !form || !box || !window.fetch || !window.TextDecoder) return;
  let busy = false;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function now() {
    const d = new Date();
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function bubble(mine, kind) {
    const empty = log.querySelector("li.empty");
    if (empty) empty.remove();
    const li = el("li", "bubble " + (mine ? "me" : "bot") + (kind === "notice" ? " notice" : ""));
    li.appendChild(el("span", "who", (mine ? "You" : "lifebot") + " · " + now()));
    log.appendChild(li);
    return li;
  }

  // The answer's words, with each [n] a link to the source it cites.
  function writeText(li, text, sources) {
    let p = li.querySelector("p.text");
    if (!p) {
      p = el("p", "text");
      li.appendChild(p);
    }
    p.textContent = "";
    const byIndex = {};
    (sources || []).forEach(function (s) { if (s.href) byIndex[s.index] = s; });
    const re = /\[(\d{1,3})\]/g;
    let at = 0;
    let m;
    while ((m = re.exec(text)) !== null) {
      const s = byIndex[Number(m[1])];
      if (!s) continue;
      p.appendChild(document.createTextNode(text.slice(at, m.index)));
      const a = el("a", "cite", m[0]);
      a.href = s.href;
      if (s.external) { a.rel = "noopener noreferrer"; a.target = "_blank"; }
      a.appendChild(el("span", "sr-only", " (source: " + s.label + ")"));
      p.appendChild(a);
      at = m.index + m[0].length;
    }
    p.appendChild(document.createTextNode(text.slice(at)));
  }

  function writeSources(li, sources) {
    if (!sources || !sources.length) return;
    const ol = el("ol", "sources");
    ol.setAttribute("aria-label", "Sources");
    sources.forEach(function (s) {
      const item = el("li");
      const words = "[" + s.index + "] " + s.label;
      if (s.href) {
        const a = el("a", "", words);
        a.href = s.href;
        if (s.external) { a.rel = "noopener noreferrer"; a.target = "_blank"; }
        item.appendChild(a);
      } else {
        item.textContent = words;
      }
      ol.appendChild(item);
    });
    li.appendChild(ol);
  }

  function writeButtons(li, buttons) {
    if (!buttons || !buttons.length) return;
    const row = el("div", "buttons");
    buttons.forEach(function (b) {
      const button = el("button", "", b.label);
      button.type = "button";
      button.addEventListener("click", function () {
        send(pressedForm(b.data, b.label), b.label);
      });
      row.appendChild(button);
    });
    li.appendChild(row);
  }

  function pressedForm(data, label) {
    const fd = new FormData();
    fd.append("csrf", form.querySelector("input[name=csrf]").value);
    fd.append("data", data);
    fd.append("text", label);
    return fd;
  }

  function scrollDown() {
    form.scrollIntoView({ block: "end" });
  }

  function say(words) {
    status.textContent = words;
  }

  // Send one message and show what comes back, line by line, as it comes.
  async function send(data, shown) {
    if (busy) return;
    busy = true;
    form.setAttribute("aria-busy", "true");
    const mine = bubble(true);
    const attached = data.get("file");
    if (attached && attached.name) mine.appendChild(el("span", "file", "File: " + attached.name));
    if (shown) mine.appendChild(el("p", "text", shown));
    let current = null; // the answer being written
    let progress = null;
    say("Sent. lifebot is answering…");
    scrollDown();
    try {
      const res = await fetch("/chat", {
        method: "POST",
        body: data,
        credentials: "same-origin",
        headers: { Accept: "application/x-ndjson" },
      });
      if (!res.ok || !res.body) {
        let words = "That did not work (" + res.status + ").";
        if (res.status === 403) words = "This page has expired: reload it and send again.";
        else if ((res.headers.get("content-type") || "").indexOf("json") !== -1) {
          const said = await res.json(); // ours, or the request layer's problem details
          words = said.error || said.detail || words;
        }
        const li = bubble(false, "notice");
        writeText(li, words);
        say(words);
        return false;
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let pending = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        pending += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = pending.indexOf("\n")) !== -1) {
          const line = pending.slice(0, nl);
          pending = pending.slice(nl + 1);
          if (!line.trim()) continue;
          const ev = JSON.parse(line);
          if (ev.type === "progress") {
            if (!current) { current = bubble(false); current.classList.add("writing"); current.setAttribute("aria-busy", "true"); }
            if (!progress) { progress = el("p", "progress"); current.appendChild(progress); }
            progress.textContent = ev.label;
          } else if (ev.type === "delta") {
            if (!current) { current = bubble(false); current.classList.add("writing"); current.setAttribute("aria-busy", "true"); }
            if (progress) { progress.remove(); progress = null; }
            current.dataset.text = (current.dataset.text || "") + ev.text;
            writeText(current, current.dataset.text);
          } else if (ev.type === "message") {
            let li = current;
            if (!li || ev.kind !== "reply") li = bubble(false, ev.kind);
            if (progress && li === current) { progress.remove(); progress = null; }
            writeText(li, ev.text, ev.sources);
            writeSources(li, ev.sources);
            writeButtons(li, ev.buttons);
            li.classList.remove("writing");
            li.removeAttribute("aria-busy");
            if (li === current) current = null;
            say("lifebot: " + ev.text);
          } else if (ev.type === "done") {
            if (ev.message_id) mine.id = "m" + ev.message_id;
          }
          scrollDown();
        }
      }
      return true;
    } catch (err) {
      const li = bubble(false, "notice");
      writeText(li, "The connection broke before the answer came. It is kept: reload the page to see it.");
      return false;
    } finally {
      if (current) { current.classList.remove("writing"); current.removeAttribute("aria-busy"); }
      busy = false;
      form.removeAttribute("aria-busy");
    }
  }

  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    const hasFile = file && file.files && file.files.length > 0;
    if (!box.value.trim() && !hasFile) { box.focus(); return; }
    const data = new FormData(form);
    const text = box.value;
    box.value = "";
    if (file) file.value = "";
    if (fileName) fileName.textContent = "";
    const ok = await send(data, text.trim() ? text : "");
    if (ok === false && !box.value) box.value = text; // nothing was taken: keep the words
    box.focus();
  });

  // Enter sends; Shift+Enter is a new line (and nothing while an input method composes).
  box.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  if (file && fileName) {
    file.addEventListener("change", function () {
      fileName.textContent = file.files.length ? file.files[0].name : "";
    });
  }

  // Buttons that send a command (New conversation, Retry) stream their answer too.
  document.querySelectorAll("form.chat-press").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      e.preventDefault();
      const data = new FormData(f);
      send(data, data.get("text"));
      if (f.classList.contains("retry")) f.remove();
    });
  });

  scrollDown();
})();
