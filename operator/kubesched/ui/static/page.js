"use strict";
// kubesched's web view: draws the JSON of /ui/api/state (kubesched.ui.shape), polling it
// every 2 s; a page written by `simulate --html` carries its state and polls nothing.
(function () {
  const POOLS = ["active", "backoff", "unschedulable", "gated"];
  const embedded = JSON.parse(document.getElementById("embedded-state").textContent || "null");
  let state = embedded;
  let selected = null; // "ns/name" of the pod whose explanation is shown
  let explained = null;

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "style") el.style.cssText = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const svgNS = "http://www.w3.org/2000/svg";
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return el;
  }
  function fill(id, ...children) {
    const el = document.getElementById(id);
    el.replaceChildren(...children.flat(Infinity).filter((c) => c));
  }
  function podLink(key) {
    return h("a", { class: "pod", href: "#pod/" + key, "data-pod": key }, key);
  }
  function table(headers, rows, attrs) {
    return h("table", attrs || {}, h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
      h("tbody", {}, rows));
  }

  // -- tiles ---------------------------------------------------------------------------
  function tiles() {
    const q = state.queues.counts;
    const blocked = state.gangs.filter((g) => g.status !== "Scheduled").length;
    const t = (label, value, colour, id) =>
      h("div", { class: "tile", style: "--c:" + colour, id: "tile-" + id }, h("b", {}, value), h("span", {}, label));
    fill("tiles",
      t("active", q.active, "var(--active)", "active"),
      t("backoff", q.backoff, "var(--backoff)", "backoff"),
      t("unschedulable", q.unschedulable, "var(--unschedulable)", "unschedulable"),
      t("gated", q.gated, "var(--gated)", "gated"),
      t("gangs not placed", blocked + " / " + state.gangs.length, "#9b59b6", "gangs"),
      t("nodes", state.nodes, "#64748b", "nodes"),
      t("pods in cache", state.pods, "#64748b", "pods"));
  }

  // -- queues --------------------------------------------------------------------------
  function snapshotBars(sample) {
    const max = Math.max(1, ...POOLS.map((k) => sample[k]));
    return h("div", { class: "bars", id: "queue-chart" }, POOLS.map((k) => [
      h("div", {}, h("span", { class: "pool " + k }, k)),
      h("div", { class: "bar" }, h("i", { style: `width:${(100 * sample[k] / max).toFixed(1)}%;background:var(--${k})` })),
      h("div", { class: "num" }, sample[k])]));
  }
  function chart(history) {
    if (history.length < 2) return history.length ? snapshotBars(history[0]) : null;
    const W = 900, H = 170, L = 36, B = 20;
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", height: H, id: "queue-chart" });
    const max = Math.max(1, ...history.flatMap((p) => POOLS.map((k) => p[k])));
    const t0 = history.length ? history[0].t : 0, t1 = history.length ? history[history.length - 1].t : 1;
    const x = (t) => L + (t1 > t0 ? ((t - t0) / (t1 - t0)) * (W - L - 8) : (W - L - 8));
    const y = (v) => 8 + (1 - v / max) * (H - B - 8);
    for (const v of [0, Math.ceil(max / 2), max]) {
      svg.append(s("line", { x1: L, x2: W - 8, y1: y(v), y2: y(v), stroke: "#e3e6eb" }));
      svg.append(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v));
    }
    for (const k of POOLS) {
      const pts = history.map((p) => `${x(p.t).toFixed(1)},${y(p[k]).toFixed(1)}`);
      if (pts.length === 1) pts.unshift(`${L},${y(history[0][k]).toFixed(1)}`);
      svg.append(s("polyline", { points: pts.join(" "), fill: "none", style: `stroke:var(--${k})`, "stroke-width": 2.5 }));
    }
    const span = t1 - t0;
    svg.append(s("text", { x: L, y: H - 4 }, span > 0 ? `last ${Math.round(span)} s` : "now"));
    const legend = h("div", { class: "legend" }, POOLS.map((k) =>
      h("span", {}, h("i", { style: `background:var(--${k})` }), k)));
    return [svg, legend];
  }
  function queues() {
    const q = state.queues;
    const rows = [];
    for (const pool of POOLS) {
      for (const p of q.pods[pool] || []) {
        rows.push(h("tr", { "data-queued": p.pod },
          h("td", {}, podLink(p.pod)), h("td", {}, h("span", { class: "pool " + pool }, pool)),
          h("td", { class: "mono" }, p.profile), h("td", { class: "num" }, p.attempts),
          h("td", { class: "reason" }, p.reason || h("span", { class: "muted" }, "not tried yet"))));
      }
    }
    fill("view-queues",
      h("div", { class: "card" }, h("h2", {}, q.history.length < 2 ? "Queue sizes" : "Queue sizes over time"), chart(q.history)),
      h("div", { class: "card" }, h("h2", {}, `Pods in the queues (${rows.length})`),
        rows.length ? table(["Pod", "Pool", "Profile", "Attempts", "Last reason"], rows, { id: "queue-table" })
          : h("div", { class: "empty" }, "No pod is waiting: every pod this scheduler serves is placed.")));
  }

  // -- gangs ---------------------------------------------------------------------------
  function gangs() {
    const rows = state.gangs.map((g) => {
      const total = Math.max(g.minMember || 0, g.bound + g.waiting + g.missing, 1);
      const pct = (n) => (100 * n / total).toFixed(1) + "%";
      return h("tr", { "data-gang": g.name },
        h("td", { class: "mono" }, g.name, h("div", { class: "muted", style: "font-size:11px" }, g.api)),
        h("td", {}, h("span", { class: "badge " + g.status }, g.status)),
        h("td", { class: "num" }, g.minMember === null ? "-" : g.minMember),
        h("td", { class: "num gang-bound" }, g.bound),
        h("td", { class: "num gang-waiting" }, g.waiting),
        h("td", { class: "num gang-missing" }, g.missing),
        h("td", {}, h("div", { class: "gangbar", title: `${g.bound} bound, ${g.waiting} waiting, ${g.missing} missing` },
          h("i", { class: "b", style: "width:" + pct(g.bound) }), h("i", { class: "w", style: "width:" + pct(g.waiting) }),
          h("i", { class: "m", style: "width:" + pct(g.missing) }))),
        h("td", { class: "reason gang-blocker" }, g.blocker || h("span", { class: "muted" }, "—"),
          g.members.waiting.length ? h("div", { style: "margin-top:4px" }, g.members.waiting.slice(0, 6).map((k) =>
            h("span", { style: "display:inline-block;margin-right:8px" }, podLink(k)))) : null));
    });
    fill("view-gangs", h("div", { class: "card" }, h("h2", {}, `Gangs (${rows.length})`),
      rows.length ? [table(["PodGroup", "Status", "Min", "Bound", "Waiting", "Missing", "", "Blocker"], rows, { id: "gang-table" }),
        h("div", { class: "legend" }, [["b", "bound (on a node)"], ["w", "waiting (exists, not on a node)"], ["m", "missing (below minMember)"]]
          .map(([c, label]) => h("span", {}, h("span", { class: "gangbar", style: "width:14px;height:14px" }, h("i", { class: c, style: "width:100%" })), label)))]
        : h("div", { class: "empty" }, "No PodGroup and no pod in a gang.")));
  }

  // -- profiles ------------------------------------------------------------------------
  function colourOf(plugin) {
    // kubesched.ui.shape.plugin_colour, sent with the state
    return (state.colours || {})[plugin.split(":")[0]] || "#9aa3b2";
  }
  function profiles() {
    const cards = state.profiles.map((p) => h("div", { class: "card", "data-profile": p.schedulerName },
      h("h2", {}, h("span", { class: "mono" }, p.schedulerName), " ",
        h("span", { class: "badge " + (p.ready ? "ready" : "notready") }, p.ready ? "Ready" : "Not ready"),
        " ", h("span", { class: "muted", style: "font-weight:400" }, p.source)),
      p.message ? h("div", { class: p.ready ? "muted" : "message" }, (p.reason ? p.reason + ": " : "") + p.message) : null,
      h("div", { class: "chain" }, p.chain.map((c) => [h("div", { class: "pt" }, c.point),
        h("div", {}, c.plugins.map((n) => h("span", { class: "chip", style: "--c:" + colourOf(n) }, n)))]))));
    fill("view-profiles", h("div", { class: "profiles" }, cards));
  }

  // -- why pending ---------------------------------------------------------------------
  function pendingKeys() {
    return POOLS.flatMap((pool) => (state.queues.pods[pool] || []).map((p) => p.pod)).sort();
  }
  function podView() {
    const keys = pendingKeys();
    if (!selected && keys.length) selected = keys[0];
    const reasonOf = {};
    for (const pool of POOLS) for (const p of state.queues.pods[pool] || []) reasonOf[p.pod] = pool;
    const list = h("div", { class: "card podlist" }, h("h2", {}, "Pending pods"),
      keys.length ? keys.map((k) => h("a", { class: "pod" + (k === selected ? " on" : ""), href: "#pod/" + k }, k,
        h("small", {}, reasonOf[k]))) : h("div", { class: "empty" }, "No pending pod."));
    const right = h("div", { id: "explain" });
    fill("view-pod", h("div", { class: "grid2" }, list, right));
    if (!selected) return;
    const exp = explained && explained.pod === selected ? explained
      : (state.explanations ? state.explanations[selected] : null);
    if (!exp) { right.append(h("div", { class: "card empty" }, "Explaining " + selected + " …")); return; }
    if (exp.error) { right.append(h("div", { class: "card message" }, exp.error)); return; }
    right.append(...explainCard(exp).filter((c) => c));
  }
  function explainCard(e) {
    const heat = h("div", { class: "heat", id: "heatmap" }, e.cells.map((c) => h("div", {
      class: "cell", "data-node": c.node, title: `${c.node}: ${c.feasible ? c.reason : c.plugin + ": " + c.reason}`,
      style: `background:${c.colour};opacity:${c.feasible ? (0.45 + 0.55 * c.shade).toFixed(2) : 1}` },
      h("b", {}, c.node), h("span", { class: "why" }, c.feasible ? "score " + c.total : c.plugin))));
    const legend = h("div", { class: "legend" }, e.legend.map((l) =>
      h("span", {}, h("i", { style: "background:" + l.colour }), `${l.plugin} (${l.nodes})`)));
    const parts = [
      h("div", { class: "card" },
        h("h2", {}, h("span", { class: "mono" }, e.pod), " ", h("span", { class: "badge Pending" }, e.status),
          h("span", { class: "muted", style: "font-weight:400" }, "  profile " + e.profile)),
        h("div", { class: "message", id: "explain-message" }, e.message),
        e.podGroup ? h("div", { class: "muted" }, `Pod group ${e.podGroup.podGroup}: ${e.podGroup.message || "placed"}`) : null,
        h("h2", { style: "margin-top:14px" }, "Nodes, coloured by the plugin that rejects them"), heat, legend),
    ];
    if (e.bars.length) {
      parts.push(h("div", { class: "card" },
        h("h2", {}, `Score on the best node, ${e.best.node} (total ${e.best.total}); tick: best any node got`),
        h("div", { class: "bars", id: "score-bars" }, e.bars.map((b) => [
          h("div", { class: "mono" }, `${b.plugin} ×${b.weight}`),
          h("div", { class: "bar" }, h("i", { style: `width:${(100 * b.score / Math.max(b.limit, 1)).toFixed(1)}%;background:${colourOf(b.plugin)}` }),
            h("u", { style: `left:${(100 * b.max / Math.max(b.limit, 1)).toFixed(1)}%` })),
          h("div", { class: "num" }, `${b.score} / ${b.limit}`)]))));
    }
    if (e.rejected.length) {
      parts.push(h("div", { class: "card" }, h("h2", {}, `Rejected nodes (${e.rejected.length})`),
        table(["Node", "Plugin", "Code", "Reason"], e.rejected.map((r) => h("tr", {},
          h("td", { class: "mono" }, r.node), h("td", {}, h("span", { class: "chip", style: "--c:" + colourOf(r.plugin) }, r.plugin)),
          h("td", {}, r.code), h("td", { class: "reason" }, r.reason))), { id: "rejected-table" })));
    }
    return parts;
  }

  // -- navigation and refresh ----------------------------------------------------------
  function route() {
    const hash = decodeURIComponent(location.hash.slice(1)) || "queues";
    const [view, ...rest] = hash.split("/");
    if (view === "pod" && rest.length >= 2) selected = rest.slice(0, 2).join("/");
    const on = ["queues", "gangs", "profiles", "pod"].includes(view) ? view : "queues";
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("on", a.dataset.view === on);
    for (const v of document.querySelectorAll(".view")) v.classList.toggle("on", v.id === "view-" + on);
    return on;
  }
  function render() {
    if (!state) return;
    document.getElementById("source").textContent = state.source;
    tiles(); queues(); gangs(); profiles(); podView();
    document.body.dataset.rendered = "1";
  }
  async function fetchJSON(path) {
    const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
    return body;
  }
  async function explainSelected() {
    if (embedded || !selected || route() !== "pod") return;
    const [ns, name] = selected.split("/");
    try {
      explained = await fetchJSON(`api/explain/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`);
    } catch (err) {
      explained = { pod: selected, error: String(err.message || err) };
    }
    render();
  }
  async function refresh() {
    try {
      state = await fetchJSON("api/state");
      document.getElementById("live").textContent = "live · updated " + new Date().toLocaleTimeString();
      render();
      await explainSelected();
    } catch (err) {
      document.getElementById("live").textContent = "not updating: " + (err.message || err);
    }
  }
  window.addEventListener("hashchange", () => { route(); render(); explainSelected(); });
  route();
  if (embedded) {
    document.getElementById("live").textContent = "snapshot";
    render();
  } else {
    refresh();
    setInterval(refresh, 2000);
  }
})();
