// tx ui: live updates of the server-rendered pages (server-sent events). Without script the
// pages still show everything as of their loading.
"use strict";

function liveApps() {
  const table = document.querySelector("table.apps[data-events]");
  if (!table) return;
  const live = document.getElementById("live");
  const source = new EventSource(table.dataset.events);
  source.addEventListener("apps", (ev) => {
    const d = JSON.parse(ev.data);
    document.getElementById("rows").innerHTML = d.rows;
    document.getElementById("problems").innerHTML = d.problems;
    document.getElementById("count").textContent = d.label;
    live.textContent = "live, " + new Date().toLocaleTimeString();
  });
  source.onerror = () => { live.textContent = "reconnecting..."; };
}

function liveStatus() {
  const section = document.querySelector("#status[data-events]");
  if (!section) return;
  const source = new EventSource(section.dataset.events);
  source.addEventListener("status", (ev) => {
    const d = JSON.parse(ev.data);
    const open = section.querySelector("details") && section.querySelector("details").open;
    section.innerHTML = d.html;
    if (open && section.querySelector("details")) section.querySelector("details").open = true;
    const cancel = document.getElementById("cancel");
    if (cancel && d.terminal) cancel.disabled = true;
  });
  source.addEventListener("end", () => source.close());
}

function liveSweep() {
  const section = document.querySelector("#sweep[data-events]");
  if (!section) return;
  const source = new EventSource(section.dataset.events);
  source.addEventListener("sweep", (ev) => {
    const d = JSON.parse(ev.data);
    section.innerHTML = d.html;
    if (d.plot !== undefined) { document.getElementById("plot").innerHTML = d.plot; plotChoices(); }
    const cancel = document.getElementById("cancel");
    if (cancel && d.terminal) cancel.disabled = true;
  });
  source.addEventListener("end", () => source.close());
}

// choosing a metric or a parameter plots it (the form's button does it without script)
function plotChoices() {
  const form = document.getElementById("plot-form");
  if (!form) return;
  for (const select of form.querySelectorAll("select")) select.addEventListener("change", () => form.submit());
}

function logs() {
  const bar = document.getElementById("logbar");
  if (!bar) return;
  const pre = document.getElementById("log");
  const state = document.getElementById("logstate");
  const replica = document.getElementById("replica");
  const streams = document.getElementById("streams");
  const follow = document.getElementById("follow");
  const search = document.getElementById("search");
  let lines = [];
  let pending = [];
  let timer = null;
  let source = null;

  function matches(line) { return !search.value || line.includes(search.value); }
  function scroll() { if (follow.checked) pre.scrollTop = pre.scrollHeight; }
  // each batch is a block of its own, so that the browser lays out only what is new
  function show(batch) {
    const shown = batch.filter(matches);
    if (!shown.length) return;
    const block = document.createElement("span");
    block.className = "batch";
    block.textContent = shown.join("");
    pre.appendChild(block);
  }
  // lines are drawn at most every 50 ms, however fast they come
  function flush() {
    timer = null;
    if (pending.length) { show(pending); pending = []; }
    pre.dataset.lines = String(lines.length);
    scroll();
  }
  function redraw() { pre.textContent = ""; show(lines); scroll(); }

  function open() {
    if (source) source.close();
    if (timer) { clearTimeout(timer); timer = null; }
    lines = [];
    pending = [];
    pre.textContent = "";
    pre.dataset.lines = "0";
    pre.dataset.done = "";
    if (!replica.value) return;
    const slash = replica.value.lastIndexOf("/");
    const q = new URLSearchParams({
      handle: bar.dataset.handle, role: replica.value.slice(0, slash), replica: replica.value.slice(slash + 1),
      follow: follow.checked ? "1" : "0",
    });
    if (streams.value) q.set("streams", streams.value);
    state.textContent = "reading...";
    source = new EventSource("/events/log?" + q.toString());
    source.addEventListener("lines", (ev) => {
      const batch = JSON.parse(ev.data);
      const first = Number(ev.lastEventId) - batch.length;
      if (first !== lines.length) { state.textContent = "out of order: expected line " + lines.length + ", got " + first; }
      for (const line of batch) { lines.push(line); pending.push(line); }
      state.textContent = lines.length + " lines" + (follow.checked ? ", following" : "");
      if (!timer) timer = setTimeout(flush, 50);
    });
    function finish(text) {
      source.close();
      if (timer) clearTimeout(timer);
      flush();
      pre.dataset.done = "1";
      state.textContent = text;
    }
    source.addEventListener("end", (ev) => finish("end of log: " + JSON.parse(ev.data).lines + " lines"));
    source.addEventListener("problem", (ev) => finish(ev.data));
    source.onerror = () => { if (!pre.dataset.done) state.textContent = "reconnecting..."; };
  }

  replica.addEventListener("change", open);
  streams.addEventListener("change", open);
  follow.addEventListener("change", () => { if (follow.checked && pre.dataset.done) open(); else scroll(); });
  search.addEventListener("input", redraw);
  open();
}

function confirmCancel() {
  const form = document.getElementById("cancel-form");
  if (!form) return;
  form.addEventListener("submit", (ev) => { if (!window.confirm(form.dataset.confirm)) ev.preventDefault(); });
}

liveApps();
liveStatus();
liveSweep();
plotChoices();
logs();
confirmCancel();
