// The dashboard's history section: a chart of a limiter's (or one kept
// key's) admitted, denied and paused cost per minute or hour, drawn as
// plain SVG, and a search of the kept keys by prefix. It reads
// GET /v1/limiters, GET /v1/limiters/{name}/history and
// GET /v1/limiters/{name}/keys?prefix= with the page's token.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  const SERIES = [["admitted", "#176b2c"], ["denied", "#b00020"], ["paused", "#c77700"]];
  // key: the chosen key's bytes in base64url (a kept key's key_b64: its text
  // shows U+FFFD for bytes that are not UTF-8 and would name another key), or null.
  const state = {limiter: "", key: null, range: "1h", busy: false};
  const b64url = (s) => {
    const bytes = new TextEncoder().encode(s);
    let bin = "";
    for (const b of bytes) bin += String.fromCharCode(b);
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };
  async function get(path) {
    const h = {};
    const tok = sessionStorage.getItem("edgelimit-token") || "";
    if (tok) h["Authorization"] = "Bearer " + tok;
    const r = await fetch(path, {headers: h, cache: "no-store"});
    if (!r.ok) {
      let detail = r.status + " " + r.statusText;
      try { const p = await r.json(); detail = p.title + ": " + p.detail; } catch (_) {}
      throw new Error(detail);
    }
    return r.json();
  }
  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }
  function fmtTime(ms, stepMs) {
    const d = new Date(ms);
    return stepMs >= 3600000 ? d.toISOString().slice(5, 13).replace("T", " ") + "h" : d.toISOString().slice(11, 16);
  }
  // chart draws h (a HistoryView) as an SVG of polylines, one per series.
  function chart(h) {
    const W = 720, H = 220, L = 56, R = 10, T = 10, B = 28;
    const n = h.points.length;
    let top = 0;
    for (const p of h.points) top = Math.max(top, p.admitted, p.denied, p.paused);
    const ymax = top > 0 ? top : 1;
    const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - R)) / (n - 1));
    const y = (v) => T + (H - T - B) * (1 - v / ymax);
    const svg = svgEl("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", id: "hist-svg",
      "data-points": n, "data-max": top});
    svg.appendChild(svgEl("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fafafa", stroke: "#ccc"}));
    for (const f of [0, 0.5, 1]) {
      const v = ymax * f;
      const t = svgEl("text", {x: L - 4, y: y(v) + 4, "text-anchor": "end", "font-size": 11});
      t.textContent = top > 0 ? (Number.isInteger(v) ? v : v.toFixed(1)) : (f === 0 ? 0 : "");
      svg.appendChild(t);
    }
    for (const [i, anchor] of [[0, "start"], [Math.floor((n - 1) / 2), "middle"], [n - 1, "end"]]) {
      const t = svgEl("text", {x: x(i), y: H - 8, "text-anchor": anchor, "font-size": 11});
      t.textContent = fmtTime(h.from_ms + i * h.step_ms, h.step_ms) + " UTC";
      svg.appendChild(t);
    }
    for (const [name, colour] of SERIES) {
      const pts = h.points.map((p, i) => x(i).toFixed(1) + "," + y(p[name]).toFixed(1)).join(" ");
      svg.appendChild(svgEl("polyline", {points: pts, fill: "none", stroke: colour, "stroke-width": 1.5,
        "data-series": name}));
    }
    return svg;
  }
  function legend(h) {
    const d = document.createElement("div");
    d.id = "hist-totals";
    const what = h.key === undefined ? "limiter " + h.limiter + " (all keys)" : "key \"" + shownKey(h.key) + "\"";
    const per = h.step_ms >= 3600000 ? "hour" : "minute";
    d.textContent = what + ", per " + per + ", last " + h.range + " — totals: admitted " + h.totals.admitted +
      ", denied " + h.totals.denied + ", paused " + h.totals.paused;
    for (const [name, colour] of SERIES) {
      const s = document.createElement("span");
      s.textContent = " ■ " + name;
      s.style.color = colour;
      d.appendChild(s);
    }
    d.dataset.admitted = h.totals.admitted;
    d.dataset.denied = h.totals.denied;
    d.dataset.paused = h.totals.paused;
    return d;
  }
  async function draw() {
    if (!state.limiter || state.busy) return;
    state.busy = true;
    try {
      let path = "/v1/limiters/" + encodeURIComponent(state.limiter) + "/history?range=" + state.range;
      if (state.key !== null) path += "&key_b64=" + state.key;
      const h = await get(path);
      $("hist-chart").replaceChildren(chart(h), legend(h));
      $("hist-status").textContent = h.history.write_errors > 0 ?
        "history write errors: " + h.history.write_errors + " (" + h.history.last_error + ")" : "";
    } catch (e) {
      $("hist-status").textContent = "history: " + e.message;
    } finally { state.busy = false; }
  }
  async function search() {
    const prefix = $("hist-key").value;
    if (!state.limiter) return;
    try {
      const r = await get("/v1/limiters/" + encodeURIComponent(state.limiter) + "/keys?top=50&prefix=" +
        encodeURIComponent(prefix));
      const body = $("hist-search").tBodies[0];
      body.replaceChildren(...r.keys.map((k) => {
        const tr = document.createElement("tr");
        tr.dataset.key = k.key;
        tr.dataset.keyB64 = k.key_b64;
        for (const c of [shownKey(k.key), k.count, k.limit, (k.used * 100).toFixed(0) + "%"]) {
          const td = document.createElement("td");
          td.textContent = String(c);
          tr.appendChild(td);
        }
        const b = document.createElement("button");
        b.textContent = "chart";
        b.className = "chart";
        b.type = "button";
        b.addEventListener("click", () => { state.key = k.key_b64; $("hist-key").value = k.key; draw(); });
        const td = document.createElement("td");
        td.appendChild(b);
        tr.appendChild(td);
        return tr;
      }));
      $("hist-matches").textContent = r.matches ? r.matches + " kept keys match" +
        (r.matches > r.keys.length ? ", first " + r.keys.length + " shown" : "") : "no kept key matches";
    } catch (e) {
      $("hist-status").textContent = "search: " + e.message;
    }
  }
  async function limiters() {
    const sel = $("hist-limiter");
    try {
      const ls = await get("/v1/limiters");
      const names = ls.limiters.map((l) => l.name);
      if (names.join("\n") !== [...sel.options].map((o) => o.value).join("\n")) {
        sel.replaceChildren(...names.map((n) => { const o = document.createElement("option"); o.value = n; o.textContent = n; return o; }));
      }
      if (!state.limiter && names.length > 0) state.limiter = names[0];
      sel.value = state.limiter;
      return true;
    } catch (e) {
      $("hist-status").textContent = "history: " + e.message;
      return false;
    }
  }
  let timer = null;
  $("hist-key").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(search, 200);
  });
  $("histform").addEventListener("submit", (e) => {
    e.preventDefault();
    const v = $("hist-key").value;
    state.key = v === "" ? null : b64url(v);
    draw();
    search();
  });
  $("hist-limiter").addEventListener("change", () => {
    state.limiter = $("hist-limiter").value;
    state.key = null;
    $("hist-key").value = "";
    draw();
    search();
  });
  for (const b of document.querySelectorAll("#hist-ranges button")) {
    b.addEventListener("click", () => {
      state.range = b.dataset.range;
      for (const o of document.querySelectorAll("#hist-ranges button")) o.classList.toggle("on", o === b);
      draw();
    });
  }
  // The token form of the page: redraw with the new token.
  $("tokenform").addEventListener("submit", () => setTimeout(start, 0));
  async function start() {
    if (await limiters()) { draw(); search(); }
  }
  start();
  setInterval(async () => { if (await limiters()) draw(); }, 10000);
})();
