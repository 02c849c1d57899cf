"use strict";
// driftdesk's page: the interactive parts (task tables, attempts, a pass beside a fail, the
// trend's flip matrix) drawn from the JSON block. Every text from the data goes into the page
// as text (textContent, text nodes, attribute values): nothing here parses data as markup.
(function () {
  const DATA = JSON.parse(document.getElementById("driftdesk-data").textContent);
  const app = document.getElementById("app");
  const PAGE_SIZE = 100;

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  const pct = (v) => (v === null || v === undefined ? "—" : (v * 100).toFixed(1) + "%");
  const num = (v, digits) => (v === null || v === undefined ? "—" : Number(v).toFixed(digits || 0));
  const oneLine = (text, width) => {
    const flat = String(text || "").replace(/\s+/g, " ").trim();
    return flat.length > width ? flat.slice(0, width - 1) + "…" : flat;
  };

  function compare(a, b) {
    if (a === null || a === undefined || b === null || b === undefined) return 0;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  // A sortable, filterable table that draws one page of rows at a time (big runs: thousands
  // of tasks stay quick because only PAGE_SIZE rows are ever in the DOM).
  function dataTable(opts) {
    const state = { sort: opts.sort || null, dir: opts.dir || 1, query: "", page: 0, on: {} };
    const search = el("input", { type: "search", placeholder: opts.placeholder || "filter", "aria-label": "filter" });
    search.addEventListener("input", () => { state.query = search.value.toLowerCase(); state.page = 0; draw(); });
    const controls = el("div", { class: "controls" }, search);
    for (const toggle of opts.toggles || []) {
      const box = el("input", { type: "checkbox", "data-toggle": toggle.name });
      box.addEventListener("change", () => { state.on[toggle.name] = box.checked; state.page = 0; draw(); });
      controls.append(el("label", null, box, " " + toggle.label));
    }
    const count = el("span", { class: "count" });
    controls.append(count);
    const buttons = {};
    const head = el("tr");
    for (const column of opts.columns) {
      const cls = column.numeric ? "num" : null;
      if (column.sortable === false) { head.append(el("th", { class: cls, text: column.label })); continue; }
      const button = el("button", { class: "sort", type: "button", "data-sort": column.key, text: column.label });
      button.addEventListener("click", () => {
        if (state.sort === column.key) state.dir = -state.dir;
        else { state.sort = column.key; state.dir = column.numeric ? -1 : 1; }
        state.page = 0;
        draw();
      });
      buttons[column.key] = button;
      head.append(el("th", { class: cls }, button));
    }
    const body = el("tbody");
    const table = el("table", { class: opts.tableClass || "data" }, el("thead", null, head), body);
    const prev = el("button", { type: "button", class: "prev", text: "‹ previous" });
    const next = el("button", { type: "button", class: "next", text: "next ›" });
    const where = el("span", { class: "where" });
    prev.addEventListener("click", () => { state.page -= 1; draw(); });
    next.addEventListener("click", () => { state.page += 1; draw(); });
    const pager = el("div", { class: "pager" }, prev, where, next);

    function visible() {
      let rows = opts.rows;
      if (state.query) rows = rows.filter((r) => opts.text(r).toLowerCase().includes(state.query));
      for (const toggle of opts.toggles || []) if (state.on[toggle.name]) rows = rows.filter(toggle.test);
      const column = opts.columns.find((c) => c.key === state.sort);
      if (column) {
        const dir = state.dir;
        rows = rows.slice().sort((a, b) => {
          const x = column.value(a), y = column.value(b);
          const missing = (x === null || x === undefined) - (y === null || y === undefined);
          return missing || compare(x, y) * dir;
        });
      }
      return rows;
    }

    function draw() {
      const rows = visible();
      const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
      state.page = Math.max(0, Math.min(state.page, pages - 1));
      const shown = rows.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
      body.replaceChildren(...shown.map((row) => {
        const tr = el("tr", opts.rowAttrs ? opts.rowAttrs(row) : null);
        for (const column of opts.columns) {
          const content = column.render ? column.render(row) : String(column.value(row) ?? "—");
          tr.append(el("td", { class: column.numeric ? "num" : null }, content));
        }
        return tr;
      }));
      count.textContent = `${rows.length} of ${opts.rows.length} shown`;
      where.textContent = `page ${state.page + 1} of ${pages}`;
      prev.disabled = state.page === 0;
      next.disabled = state.page >= pages - 1;
      pager.hidden = pages === 1;
      for (const [key, button] of Object.entries(buttons)) {
        button.setAttribute("aria-sort", key !== state.sort ? "none" : state.dir > 0 ? "ascending" : "descending");
      }
    }
    draw();
    return el("div", { class: "table-wrap" }, controls, table, pager);
  }

  function strip(outcomes) {
    return el("span", { class: "strip", "data-strip": outcomes.join(",") },
      outcomes.map((o) => el("span", { class: "o-" + (o || "none"), title: o || "no row" })));
  }

  function legend() {
    const item = (cls, label) => [el("span", { class: "key o-" + cls }), label];
    return el("p", { class: "legend sub" }, "attempts in order:", item("pass", "pass"), item("fail", "fail"),
      item("link_error", "link error"), item("harness_error", "harness error"));
  }

  // -- a run: its tasks, each task's attempts, a volatile task's pass beside a fail ----------

  function renderRun(run, many) {
    const report = run.report;
    const fields = run.attempt_fields;
    const at = (row, name) => row[fields.indexOf(name)];
    const attempts = run.attempts || {};
    const explained = run.explained || {};
    const below = new Set((report.tasks_below_min_runs || []).map((t) => t.task_id));
    const tasks = (report.tasks || []).concat(report.tasks_below_min_runs || []);
    const outcomesOf = (t) => (attempts[t.task_id] || []).map((row) => at(row, "outcome"));
    const detail = el("div", { class: "detail", hidden: true, "data-detail": "" });
    const section = el("section", { class: "run-tasks", "data-run": report.run_id },
      el("h2", { text: many ? `Tasks of ${report.run_id}` : "Tasks" }),
      el("p", { class: "sub", text: `${tasks.length} tasks; volatile ones passed sometimes and failed other times. ` +
        `Pick a task for its attempts${run.explained_of ? ", and for a volatile one why it wobbles" : ""}.` +
        (run.explained_of > Object.keys(explained).length
          ? ` (${Object.keys(explained).length} of ${run.explained_of} volatile tasks explained here: the most volatile first.)` : "") }),
      legend());
    let selected = null;
    const show = (task, tr) => {
      if (selected) selected.classList.remove("selected");
      selected = tr; if (tr) tr.classList.add("selected");
      detail.replaceChildren(...taskDetail(task, attempts[task.task_id] || [], explained[task.task_id], fields, at, below.has(task.task_id)));
      detail.hidden = false;
      detail.scrollIntoView({ block: "nearest" });
      if (!many) history.replaceState(null, "", "#task=" + encodeURIComponent(task.task_id));
    };
    section.append(wobbling(tasks, explained, run.explained_order || Object.keys(explained), show));
    section.append(dataTable({
      rows: tasks,
      text: (t) => t.task_id,
      placeholder: "filter tasks by id",
      sort: "spread",
      dir: -1,
      toggles: [
        { name: "volatile", label: "volatile only", test: (t) => t.volatile },
        { name: "failed", label: "with a fail", test: (t) => t.fails > 0 },
        { name: "errors", label: "with link or harness errors", test: (t) => t.link_errors + t.harness_errors > 0 },
      ],
      rowAttrs: (t) => ({ "data-task": t.task_id, "data-volatile": t.volatile ? "1" : "0" }),
      columns: [
        { key: "task", label: "task", value: (t) => t.task_id, render: (t) => {
          const button = el("button", { type: "button", class: "link task", text: t.task_id });
          button.addEventListener("click", (ev) => show(t, ev.target.closest("tr")));
          return below.has(t.task_id) ? [button, el("span", { class: "sub", text: " (below --min-runs)" })] : button;
        } },
        { key: "n", label: "n", numeric: true, value: (t) => t.n },
        { key: "passes", label: "passes", numeric: true, value: (t) => t.passes },
        { key: "fails", label: "fails", numeric: true, value: (t) => t.fails },
        { key: "success", label: "success", numeric: true, value: (t) => t.success_rate, render: (t) => pct(t.success_rate) },
        { key: "spread", label: "spread", numeric: true, value: (t) => t.spread, render: (t) => num(t.spread, 0) },
        { key: "link", label: "link err", numeric: true, value: (t) => t.link_errors },
        { key: "harness", label: "harness err", numeric: true, value: (t) => t.harness_errors },
        { key: "retries", label: "retries", numeric: true, value: (t) => t.retries },
        { key: "strip", label: "attempts", sortable: false, value: () => null, render: (t) => strip(outcomesOf(t)) },
      ],
    }));
    section.append(detail);
    // a link to the page with #task=<id> opens that task (a reader sends "look at this one")
    const wanted = location.hash.startsWith("#task=") ? decodeURIComponent(location.hash.slice(6)) : null;
    const linked = wanted === null ? null : tasks.find((t) => t.task_id === wanted);
    if (linked) show(linked, null);
    return section;
  }

  // The volatile tasks at a glance, the most volatile first (the order they were explained
  // in), each with explain's first finding: where its passes and fails part.
  const WOBBLING_SHOWN = 20;
  function wobbling(tasks, explained, order, show) {
    const byId = new Map(tasks.map((t) => [t.task_id, t]));
    const ids = order.filter((id) => byId.has(id) && explained[id]);
    if (!ids.length) return el("div", { hidden: true });
    const items = ids.slice(0, WOBBLING_SHOWN).map((id) => {
      const e = explained[id];
      const task = byId.get(id);
      const button = el("button", { type: "button", class: "link", text: id });
      button.addEventListener("click", () => show(task, null));
      const said = e.problem || e.finding || "";
      return el("li", { "data-wobbling": id }, button, ` ${pct(task.success_rate)} of ${task.n}: ${said}`);
    });
    return el("div", { class: "wobbling" },
      el("h3", { text: `Wobbling tasks (${ids.length}${ids.length > WOBBLING_SHOWN ? `, the first ${WOBBLING_SHOWN} shown` : ""})` }),
      el("ul", { class: "sentences" }, items));
  }

  function taskDetail(task, rows, explanation, fields, at, below) {
    const out = [
      el("h3", null, "Task ", el("code", { text: task.task_id })),
      el("p", { class: "sub", text: `n ${task.n}: ${task.passes} passes, ${task.fails} fails, ` +
        `${task.link_errors} link errors, ${task.harness_errors} harness errors; success ${pct(task.success_rate)}` +
        (below ? " (below --min-runs: not in the run's figures)" : "") }),
      strip(rows.map((row) => at(row, "outcome"))),
    ];
    const head = el("tr", null, fields.map((f) => el("th", { text: f.replace(/_/g, " ") })));
    const body = rows.map((row) => el("tr", { "data-attempt": at(row, "attempt") },
      fields.map((f, i) => el("td", { class: typeof row[i] === "number" ? "num" : null,
        text: row[i] === null || row[i] === undefined ? "" : String(row[i]) }))));
    out.push(el("h4", { text: "Attempts" }), el("table", { class: "attempts" }, el("thead", null, head), el("tbody", null, body)));
    if (explanation) out.push(...explanationNodes(explanation));
    else if (task.volatile) out.push(el("p", { class: "sub", text: "Not explained in this page: run driftdesk explain for it." }));
    return out;
  }

  function explanationNodes(e) {
    const out = [el("h4", { text: "Why it wobbles" })];
    if (e.problem) { out.push(el("p", { class: "sub", text: e.problem })); return out; }
    out.push(el("ul", { class: "sentences" }, e.sentences.map((s) => el("li", { text: s }))));
    const pair = e.pair;
    if (!pair) return out;
    out.push(el("h4", { text: `Attempt ${pair.pass} (pass) beside attempt ${pair.fail} (fail), folded by step` }));
    out.push(el("p", { class: "divergence", "data-divergence": pair.action === null ? "" : pair.action,
      text: pair.action === null ? "They took the same actions."
        : `First divergence at action ${pair.action}: pass ${pair.pass_action}; fail ${pair.fail_action}.` }));
    const grid = el("div", { class: "pairs", "data-pair": `${pair.pass}-${pair.fail}` },
      el("div", { class: "head", text: `attempt ${pair.pass} · pass` }),
      el("div", { class: "head", text: `attempt ${pair.fail} · fail` }));
    const earlier = (tries) => el("div", { class: "sub earlier" }, (tries || []).map((t) => el("div", { text: t })));
    if ((pair.pass_earlier || []).length || (pair.fail_earlier || []).length) {
      grid.append(earlier(pair.pass_earlier), earlier(pair.fail_earlier));
    }
    const steps = Math.max(pair.pass_steps.length, pair.fail_steps.length);
    for (let i = 0; i < steps; i++) {
      grid.append(stepNode(pair.pass_steps[i], i, i === pair.pass_step, "pass"));
      grid.append(stepNode(pair.fail_steps[i], i, i === pair.fail_step, "fail"));
    }
    out.push(grid);
    return out;
  }

  function stepNode(step, index, diverges, side) {
    if (!step) return el("div", { class: "empty", text: "(ended)" });
    const [kind, text, calls, tokens, latency] = step;
    const said = calls.length ? calls.map(([name, args]) => `call ${name}(${args})`).join("; ") : text;
    const figures = [tokens !== null ? `${tokens} tokens` : null, latency !== null ? `${num(latency, 0)} ms` : null].filter(Boolean);
    const node = el("details", { class: `k-${kind}` + (diverges ? " diverge" : ""), "data-step": index, "data-side": side,
      "data-diverge": diverges ? "1" : null },
      el("summary", { text: `${index + 1}. ${kind}${diverges ? " ◆ diverges" : ""}: ${oneLine(said, 90)}` }));
    if (text) node.append(el("pre", { text }));
    for (const [name, args] of calls) node.append(el("pre", { text: `call ${name}(${args})` }));
    if (figures.length) node.append(el("div", { class: "sub", text: figures.join(" · ") }));
    node.open = diverges;
    return node;
  }

  // -- a comparison: the tasks whose class changed ----------------------------------------------

  function renderCompare(comparison) {
    const changed = comparison.changed || [];
    const section = el("section", { class: "changed" }, el("h2", { text: `Changed tasks (${changed.length})` }));
    if (!changed.length) { section.append(el("p", { class: "sub", text: "No task changed class between A and B." })); return section; }
    section.append(dataTable({
      rows: changed,
      text: (t) => t.task_id,
      placeholder: "filter tasks by id",
      sort: "task",
      rowAttrs: (t) => ({ "data-task": t.task_id }),
      columns: [
        { key: "task", label: "task", value: (t) => t.task_id },
        { key: "before", label: "A", value: (t) => t.before },
        { key: "after", label: "B", value: (t) => t.after },
        { key: "success_a", label: "success A", numeric: true, value: (t) => t.success_a, render: (t) => pct(t.success_a) },
        { key: "success_b", label: "success B", numeric: true, value: (t) => t.success_b, render: (t) => pct(t.success_b) },
        { key: "delta", label: "Δ pp", numeric: true,
          value: (t) => (t.success_a === null || t.success_b === null ? null : t.success_b - t.success_a),
          render: (t) => (t.success_a === null || t.success_b === null ? "—" : ((t.success_b - t.success_a) * 100).toFixed(1)) },
      ],
    }));
    return section;
  }

  // -- a trend: the task × run flip matrix ------------------------------------------------------

  function successClass(v) {
    if (v === null || v === undefined) return "o-none";
    return v === 1 ? "o-pass" : v === 0 ? "o-fail" : "o-link_error";
  }

  function renderTrend(trend) {
    const runs = trend.runs || [];
    const tasks = trend.tasks || [];
    const section = el("section", { class: "matrix-section" },
      el("h2", { text: `Tasks × runs (${tasks.length} tasks, ${runs.length} runs, oldest first)` }),
      el("p", { class: "legend sub" }, "each cell a run:", el("span", { class: "key o-pass" }), "all passed",
        el("span", { class: "key o-link_error" }), "some passed", el("span", { class: "key o-fail" }), "none passed",
        el("span", { class: "key o-none" }), "not judged"));
    const columns = [
      { key: "task", label: "task", value: (t) => t.task_id },
      { key: "flips", label: "flips", numeric: true, value: (t) => t.flips },
    ];
    runs.forEach((run, i) => columns.push({ key: "run" + i, label: String(i + 1), numeric: true,
      value: (t) => t.success[i],
      render: (t) => el("span", { class: "cell " + successClass(t.success[i]),
        title: `${run.run_id}: ${pct(t.success[i])}`, "data-success": t.success[i] === null ? "" : t.success[i] }) }));
    section.append(dataTable({
      rows: tasks, text: (t) => t.task_id, placeholder: "filter tasks by id", sort: "flips", dir: -1,
      tableClass: "matrix", rowAttrs: (t) => ({ "data-task": t.task_id }), columns,
      toggles: [{ name: "flipped", label: "flipped only", test: (t) => t.flips > 0 }],
    }));
    return section;
  }

  if (DATA.kind === "report") {
    for (const run of DATA.runs) app.append(renderRun(run, DATA.runs.length > 1));
  } else if (DATA.kind === "compare") {
    app.append(renderCompare(DATA.compare));
  } else if (DATA.kind === "trend") {
    app.append(renderTrend(DATA.trend));
  }
  performance.mark("driftdesk-ready");
  document.body.setAttribute("data-ready", "1");
})();
