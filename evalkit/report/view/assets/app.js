// evalkit viewer: a static page over data files loaded with <script src> (works from file://).
// Every text from a run is set with textContent / text nodes, never parsed as HTML: a session is
// untrusted input, and a "<script>" in a tool output must stay text.
"use strict";

(function () {
  const EVK = (window.EVK = window.EVK || {});
  const store = {};
  const waiting = {};
  const requested = {};
  EVK.put = function (key, value) {
    store[key] = value;
    (waiting[key] || []).forEach((f) => f(value));
    delete waiting[key];
  };

  function fail(err) {
    const box = document.getElementById("errors");
    box.hidden = false;
    box.textContent += String(err && err.message ? err.message : err) + "\n";
  }
  window.addEventListener("error", (e) => fail(e.message));

  function load(file, key) {
    if (key in store) return Promise.resolve(store[key]);
    return new Promise((resolve, reject) => {
      (waiting[key] = waiting[key] || []).push(resolve);
      if (requested[file]) return;
      requested[file] = true;
      const s = document.createElement("script");
      s.src = "data/" + file;
      s.onerror = () => reject(new Error("cannot load data/" + file));
      document.head.appendChild(s);
    });
  }

  // h("td", {class: "num"}, "text", child, [more]) — strings become text nodes.
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    add(el, kids);
    return el;
  }
  function add(el, kids) {
    for (const k of kids) {
      if (k === null || k === undefined || k === false) continue;
      if (Array.isArray(k)) add(el, k);
      else if (k instanceof Node) el.appendChild(k);
      else el.appendChild(document.createTextNode(String(k)));
    }
  }

  const fmt = (x, d = 3, signed = false) =>
    x === null || x === undefined || Number.isNaN(x) ? "n/a" : (signed && x > 0 ? "+" : "") + Number(x).toFixed(d);
  const pfmt = (p) => (p === null || p === undefined ? "n/a" : p < 0.001 ? "< 0.001" : p.toFixed(3));
  const link = (params, ...kids) => h("a", { href: "#" + new URLSearchParams(params).toString() }, ...kids);
  const verdictEl = (v) => h("span", { class: "verdict v-" + String(v) }, String(v));

  // ---- filters ---------------------------------------------------------------------------
  const F = {
    cand: document.getElementById("f-cand"),
    verdict: document.getElementById("f-verdict"),
    metric: document.getElementById("f-metric"),
    session: document.getElementById("f-session"),
    search: document.getElementById("f-search"),
  };
  const want = () => ({
    cand: F.cand.value,
    verdict: F.verdict.value,
    metric: F.metric.value,
    session: F.session.value.trim().toLowerCase(),
    search: F.search.value.trim().toLowerCase(),
  });
  function options(select, values) {
    for (const v of values) select.appendChild(h("option", { value: v }, v));
  }
  // Rows carry data-cand / data-verdict / data-metric / data-session; a filter hides the rows
  // that do not match, and the search box hides rows (and events) whose text lacks the query.
  function applyFilters() {
    const w = want();
    document.querySelectorAll("[data-filter]").forEach((el) => {
      const d = el.dataset;
      const ok =
        (!w.cand || !d.cand || d.cand === w.cand) &&
        (!w.verdict || !d.verdict || d.verdict === w.verdict) &&
        (!w.metric || !d.metric || d.metric === w.metric) &&
        (!w.session || !d.session || d.session.toLowerCase().includes(w.session)) &&
        (!w.search || el.textContent.toLowerCase().includes(w.search));
      el.classList.toggle("hidden", !ok);
      if (el.tagName === "TR") el.style.display = ok ? "" : "none";
    });
    highlight(w.search);
  }
  function highlight(q) {
    document.querySelectorAll("mark.hit").forEach((m) => m.replaceWith(document.createTextNode(m.textContent)));
    document.querySelectorAll(".text").forEach((t) => t.normalize());
    if (!q) return;
    const walker = document.createTreeWalker(document.getElementById("main"), NodeFilter.SHOW_TEXT);
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    for (const node of nodes) {
      const text = node.nodeValue;
      const lower = text.toLowerCase();
      let at = lower.indexOf(q);
      if (at < 0) continue;
      const frag = document.createDocumentFragment();
      let from = 0;
      while (at >= 0) {
        frag.appendChild(document.createTextNode(text.slice(from, at)));
        frag.appendChild(h("mark", { class: "hit" }, text.slice(at, at + q.length)));
        from = at + q.length;
        at = lower.indexOf(q, from);
      }
      frag.appendChild(document.createTextNode(text.slice(from)));
      node.replaceWith(frag);
    }
  }
  Object.values(F).forEach((el) => el.addEventListener("input", applyFilters));

  // ---- small figures ---------------------------------------------------------------------
  // A dot with its interval on a shared scale per metric (SVG built as DOM, no markup strings).
  const SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    const el = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    return el;
  }
  const COLORS = { ship: "#009E73", drop: "#D55E00", inconclusive: "#0072B2", untested: "#999999" };
  function dot(e, scale) {
    const W = 160, H = 16;
    const x = (v) => 6 + ((v - scale.lo) / (scale.hi - scale.lo || 1)) * (W - 12);
    const s = svg("svg", { width: W, height: H, class: "dot" });
    s.appendChild(svg("line", { x1: x(0), x2: x(0), y1: 0, y2: H, stroke: "#888" }));
    if (e.threshold !== null) s.appendChild(svg("line", { x1: x(e.threshold), x2: x(e.threshold), y1: 0, y2: H, stroke: "#D55E00", "stroke-dasharray": "3,2" }));
    if (e.estimate === null) return s;
    const c = COLORS[e.verdict] || "#555";
    if (e.lo !== null && e.hi !== null) s.appendChild(svg("line", { x1: x(e.lo), x2: x(e.hi), y1: H / 2, y2: H / 2, stroke: c, "stroke-width": 2 }));
    s.appendChild(svg("circle", { cx: x(e.estimate), cy: H / 2, r: 4, fill: e.deciding ? c : "#fff", stroke: c, "stroke-width": 1.5 }));
    return s;
  }
  function scales(effects) {
    const out = {};
    for (const e of effects) {
      const vals = [0, e.estimate, e.lo, e.hi, e.threshold].filter((v) => v !== null && v !== undefined);
      const s = (out[e.metric] = out[e.metric] || { lo: Infinity, hi: -Infinity });
      s.lo = Math.min(s.lo, ...vals);
      s.hi = Math.max(s.hi, ...vals);
    }
    return out;
  }

  // ---- pages -----------------------------------------------------------------------------
  let O = null; // the overview data
  const main = document.getElementById("main");

  function table(head, rows, cls) {
    return h("div", { class: "wide" }, h("table", { class: cls || null }, h("thead", {}, h("tr", {}, head.map((x) => h("th", {}, x)))), h("tbody", {}, rows)));
  }

  function verdictRows(list) {
    return list.map((v) => {
      const e = O.effects.find((x) => x.cand === v.cand && x.metric === v.metric) || {};
      return h(
        "tr",
        { "data-filter": 1, "data-cand": v.cand, "data-verdict": v.verdict, "data-metric": v.metric || "" },
        h("td", {}, link({ cand: v.cand }, v.cand)),
        h("td", {}, verdictEl(v.verdict)),
        h("td", {}, v.metric || "none"),
        h("td", { class: "num" }, e.estimate === undefined ? "n/a" : `${fmt(e.estimate, 3, true)} [${fmt(e.lo, 3, true)}, ${fmt(e.hi, 3, true)}]`),
        h("td", { class: "num" }, v.p === null ? "none" : `${pfmt(v.p)} (${v.test})`),
        h("td", { class: "num" }, v.n ?? "n/a"),
        h("td", { class: "reason" }, v.reason || ""),
      );
    });
  }

  function effectRows(list, sc) {
    return list.map((e) =>
      h(
        "tr",
        { "data-filter": 1, "data-cand": e.cand, "data-verdict": e.verdict, "data-metric": e.metric },
        h("td", {}, link({ cand: e.cand }, e.cand)),
        h("td", {}, e.metric, e.deciding ? " (deciding)" : ""),
        h("td", {}, `${e.role}, ${e.direction} is better`),
        h("td", { class: "num" }, `${fmt(e.base)} → ${fmt(e.mean)}`),
        h("td", { class: "num" }, `${fmt(e.estimate, 3, true)} [${fmt(e.lo, 3, true)}, ${fmt(e.hi, 3, true)}]`),
        h("td", {}, dot(e, sc[e.metric])),
        h("td", { class: "num" }, pfmt(e.p_value)),
        h("td", { class: "num" }, pfmt(e.p_worse)),
        h("td", { class: "num" }, pfmt(e.p_holm)),
        h("td", { class: "num" }, fmt(e.threshold, 3, true)),
        h("td", { class: "num" }, fmt(e.mde, 3, true)),
        h("td", { class: "num" }, `${e.n ?? "n/a"} (${e.errors ?? 0} err)`),
      ),
    );
  }

  const SCORES = [["judge_overall", 5], ["judge_offline_overall", 5], ["exam", 1], ["exam_offline", 1], ["identifier_recall", 1], ["identifier_exam", 1]];

  function overview() {
    const sc = scales(O.effects);
    const means = {};
    for (const m of O.means) (means[m.metric] = means[m.metric] || {})[m.arm] = m;
    const scores = SCORES.filter(([m]) => m in means);
    const metricNames = Object.keys(means).sort();
    return [
      h("h1", {}, "Run ", O.name),
      O.standin ? h("p", { class: "warn" }, "Offline stand-in: summaries come from a deterministic extractive summarizer, not a language model.") : null,
      O.warnings.length ? h("div", { class: "warn" }, h("strong", {}, "Read these first"), h("ul", {}, O.warnings.map((w) => h("li", {}, w)))) : null,
      h("h2", { id: "verdicts" }, "Verdicts"),
      table(["candidate", "verdict", "deciding metric", "effect [interval]", "p (deciding test)", "n", "rule"], verdictRows(O.verdicts)),
      h("h2", { id: "effects" }, "Effects (every decision metric)"),
      h("p", { class: "muted" }, "Filled dot: the metric decided the candidate's verdict. Dashed: the metric's threshold; grey: zero. Filters above narrow the rows."),
      table(["candidate", "metric", "role", "mean: baseline → candidate", "effect [interval]", "", "p", "p worse", "p (Holm)", "threshold", "MDE", "n sessions"], effectRows(O.effects, sc)),
      h("h2", { id: "scorecard" }, "Scorecard"),
      table(
        ["arm", "tokens kept", ...scores.map(([m]) => m + " (%)")],
        O.arms.map((a) =>
          h("tr", { "data-filter": 1, "data-cand": a === O.baseline ? "" : a }, h("td", {}, a === O.baseline ? a + " (baseline)" : link({ cand: a }, a)),
            h("td", { class: "num" }, O.tokens[a] === undefined ? "–" : Math.round(O.tokens[a]).toLocaleString("en")),
            scores.map(([m, scale]) => h("td", { class: "num" }, means[m][a] ? fmt((100 * means[m][a].mean) / scale, 1) : "–"))),
        ),
      ),
      h("h2", { id: "means" }, "Metric means"),
      table(
        ["metric", ...O.arms],
        metricNames.map((m) =>
          h("tr", { "data-filter": 1, "data-metric": m }, h("td", {}, m), O.arms.map((a) => h("td", { class: "num" }, means[m][a] ? fmt(means[m][a].mean) + (means[m][a].errors ? ` (${means[m][a].errors} err)` : "") : "–"))),
        ),
      ),
      h("h2", { id: "glossary" }, "What each metric measures"),
      table(["metric", "better", "measures", "catches"], O.glossary.map((r) => h("tr", { "data-filter": 1, "data-metric": r[0] }, r.map((c) => h("td", {}, c))))),
      h("h2", { id: "sessions" }, "Sessions"),
      sessionList(O.sessions, null),
    ];
  }

  function sessionList(list, cand) {
    const c = cand || O.verdicts.map((v) => v.cand)[0] || O.arms.find((a) => a !== O.baseline);
    return table(
      ["session", cand ? "compactions" : "compactions per arm"],
      list.map((s) =>
        h("tr", { "data-filter": 1, "data-session": s.session }, h("td", {}, c ? link({ cand: c, s: s.session }, s.session) : s.session),
          h("td", { class: "muted" }, Object.entries(s.events).filter(([a]) => !cand || a === cand || a === O.baseline).map(([a, n]) => `${a} ${n}`).join(", "))),
      ),
    );
  }

  function candidatePage(cand) {
    const v = O.verdicts.find((x) => x.cand === cand);
    const info = O.candidates[cand] || { metric: null, top: [] };
    const sc = scales(O.effects);
    return [
      h("h1", {}, "Candidate ", cand, " ", v ? verdictEl(v.verdict) : null),
      v ? table(["candidate", "verdict", "deciding metric", "effect [interval]", "p (deciding test)", "n", "rule"], verdictRows([v])) : h("p", {}, "No verdict for this arm."),
      h("h2", {}, "Sessions where it differs most from ", O.baseline, info.metric ? ` on ${info.metric}` : ""),
      info.top.length
        ? table(
            ["session", O.baseline, cand, "difference"],
            info.top.map(([s, b, c, d]) =>
              h("tr", { "data-filter": 1, "data-session": s }, h("td", {}, link({ cand, s }, s)), h("td", { class: "num" }, fmt(b)), h("td", { class: "num" }, fmt(c)), h("td", { class: "num" }, fmt(d, 3, true))),
            ),
            "top",
          )
        : h("p", {}, "No session differs on this metric."),
      h("h2", {}, "Effects"),
      table(["candidate", "metric", "role", "mean: baseline → candidate", "effect [interval]", "", "p", "p worse", "p (Holm)", "threshold", "MDE", "n sessions"], effectRows(O.effects.filter((e) => e.cand === cand), sc)),
      h("h2", {}, "Every session"),
      sessionList(O.sessions, cand),
    ];
  }

  // Line-level diff (longest common subsequence): the lines only one side has are marked.
  function onlyLines(a, b) {
    const n = a.length, m = b.length;
    if (n * m > 4e6) { const sb = new Set(b), sa = new Set(a); return [a.map((x) => !sb.has(x)), b.map((x) => !sa.has(x))]; }
    const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    const oa = a.map(() => true), ob = b.map(() => true);
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) { oa[i] = ob[j] = false; i++; j++; }
      else if (L[i + 1][j] >= L[i][j + 1]) i++;
      else j++;
    }
    return [oa, ob];
  }
  function textBox(lines, only, cls) {
    return h("div", { class: "text" }, lines.map((ln, k) => h("span", { class: "line" + (only[k] ? " " + cls : "") }, ln === "" ? "\u200b" : ln)));
  }
  const lines = (t) => (t || "").split("\n");
  function carriedLines(ev) { return ev ? ev.carried.flatMap((c, k) => [`── carried text ${k + 1} ──`, ...lines(c)]) : []; }

  function pane(side, arm, ev, summaryOnly, carriedOnly) {
    if (!ev) return h("div", { class: "pane " + side }, h("h4", {}, arm), h("p", { class: "muted" }, "No compaction at this index."));
    const k = ev.kept;
    return h(
      "div",
      { class: "pane " + side, "data-arm": arm },
      h("h4", {}, arm, ` — round ${ev.round}, at message ${ev.at}, ${ev.before.toLocaleString("en")} → ${ev.after.toLocaleString("en")} tokens`, ev.over ? " (above the window: dead)" : ""),
      ev.error ? h("p", { class: "warn" }, "Summarizer error: ", ev.error) : null,
      h("div", {}, h("strong", {}, "Summary"), " ", h("span", { class: "muted" }, `${ev.summary.length.toLocaleString("en")} chars; highlighted: lines the other side lacks`)),
      textBox(lines(ev.summary), summaryOnly, side === "baseline" ? "del" : "ins"),
      h("div", {}, h("strong", {}, "Carried texts"), " ", h("span", { class: "muted" }, String(ev.carried.length))),
      ev.carried.length ? textBox(carriedLines(ev), carriedOnly, side === "baseline" ? "del" : "ins") : null,
      h("div", { class: "kept" }, h("strong", {}, "Kept tail: "), !k.ranges ? "no recorded message kept" : `messages ${k.ranges} (${k.recorded} as recorded, ${k.masked} with tool output masked), first kept id ${k.first_id ?? "n/a"}`),
      h(
        "details",
        { class: "before" },
        h("summary", {}, `Context before compaction: ${ev.removed.count} messages left the view (latest ${ev.removed.shown.length} shown)`),
        ev.removed.shown.map(([i, role, text]) => h("div", { class: "msg" }, h("span", { class: "role" }, `#${i} ${role}`), h("span", { class: "text-inline" }, text))),
      ),
    );
  }

  function mark(kept) {
    if (kept === undefined) return h("span", { class: "mark na", title: "not a fact at this arm's compaction point" }, "–");
    return kept ? h("span", { class: "mark kept" }, "✓ kept") : h("span", { class: "mark lost" }, "✗ lost");
  }

  function eventBlock(k, base, cand, bev, cev, sid) {
    const [sb, sc] = onlyLines(lines(bev && bev.summary), lines(cev && cev.summary));
    const [cb, cc] = onlyLines(carriedLines(bev), carriedLines(cev));
    const facts = new Map();
    for (const [side, ev] of [["b", bev], ["c", cev]]) for (const [kind, text, kept] of ev ? ev.facts : []) {
      const key = kind + "\u0000" + text;
      const row = facts.get(key) || { kind, text };
      row[side] = kept;
      facts.set(key, row);
    }
    const qs = new Map();
    for (const [side, ev] of [["b", bev], ["c", cev]]) for (const [label, grade, err] of ev ? ev.questions : []) {
      const row = qs.get(label) || { label };
      row[side] = err ? "error: " + err : fmt(grade, 2);
      qs.set(label, row);
    }
    const lostBy = (side) => [...facts.values()].filter((r) => r[side] === false).length;
    return h(
      "section",
      { class: "event", id: `ev-${k}`, "data-filter": 1, "data-session": sid },
      h("h3", {}, `Compaction ${k + 1}`, " ", h("a", { href: "#" + new URLSearchParams({ cand, s: sid, ev: k }).toString() }, "link")),
      h("div", { class: "sides" }, pane("baseline", base, bev, sb, cb), pane("candidate", cand, cev, sc, cc)),
      h("h4", {}, `Facts at this point (${base} lost ${lostBy("b")}, ${cand} lost ${lostBy("c")})`),
      facts.size
        ? table(["fact", "text", base, cand], [...facts.values()].map((r) => h("tr", { class: r.b !== r.c ? "differs" : null }, h("td", {}, r.kind), h("td", {}, r.text), h("td", {}, mark(r.b)), h("td", {}, mark(r.c)))), "facts")
        : h("p", { class: "muted" }, "No tally, constraint, failing command or departed identifier at this point."),
      h("h4", {}, "Exam questions asked here"),
      qs.size
        ? table(["question", base, cand], [...qs.values()].map((r) => h("tr", {}, h("td", {}, r.label), h("td", { class: "num" }, r.b ?? "–"), h("td", { class: "num" }, r.c ?? "–"))), "questions")
        : h("p", { class: "muted" }, "No exam question asked at this compaction."),
    );
  }

  async function sessionPage(cand, sid, evIndex) {
    const s = O.sessions.find((x) => x.session === sid);
    if (!s) return [h("p", {}, "No session ", sid, " in this run.")];
    const base = O.baseline;
    const get = (arm) => (s.files[arm] ? load(s.files[arm], `${s.chunk}/${arm}`) : Promise.resolve({ events: [] }));
    const [b, c] = await Promise.all([get(base), get(cand)]);
    const n = Math.max(b.events.length, c.events.length);
    const others = O.arms.filter((a) => a !== base && s.files[a]);
    const top = (O.candidates[cand] || { top: [] }).top.find((t) => t[0] === sid);
    const out = [
      h("h1", {}, "Session ", sid),
      h("p", {}, "Baseline ", base, " against ", link({ cand }, cand), ` — ${b.messages ?? c.messages} recorded messages, ${n} compactions. `,
        top ? `On ${O.candidates[cand].metric}: ${fmt(top[1])} → ${fmt(top[2])}.` : "",
        " Compare with: ", others.map((a) => [link({ cand: a, s: sid }, a), " "])),
    ];
    for (let k = 0; k < n; k++) out.push(eventBlock(k, base, cand, b.events[k], c.events[k], sid));
    return out;
  }

  async function render() {
    const p = new URLSearchParams(location.hash.slice(1));
    const cand = p.get("cand"), sid = p.get("s");
    let body;
    try {
      if (sid) body = await sessionPage(cand || O.arms.find((a) => a !== O.baseline), sid, p.get("ev"));
      else if (cand) body = candidatePage(cand);
      else body = overview();
    } catch (err) {
      fail(err);
      body = [h("p", {}, "This page could not be built: ", String(err.message || err))];
    }
    main.replaceChildren(...[body].flat());
    document.body.dataset.page = sid ? "session" : cand ? "candidate" : "overview";
    applyFilters();
    const ev = p.get("ev");
    if (ev !== null) { const el = document.getElementById("ev-" + ev); if (el) el.scrollIntoView(); }
    document.body.dataset.ready = "1";
  }

  load("overview.js", "overview")
    .then((o) => {
      O = o;
      document.getElementById("runname").textContent = O.name + (O.standin ? " (offline stand-in)" : "");
      options(F.cand, O.arms.filter((a) => a !== O.baseline));
      options(F.verdict, [...new Set(O.verdicts.map((v) => v.verdict))]);
      options(F.metric, [...new Set(O.effects.map((e) => e.metric).concat(O.means.map((m) => m.metric)))].sort());
      window.addEventListener("hashchange", render);
      return render();
    })
    .catch(fail);
})();
