// The runs list (/console/runs?status&workflow&q&since&updated_since&sort&order&cursor):
// one page from the server
// (GET /runs?limit=...), so the page holds at most PAGE rows however many runs the store
// has. The first page refreshes in the background, updating rows in place (keyed by run
// id), so input is never blocked and focus never lost. j/k move, Enter opens, / searches.
// The started and updated headers sort (aria-sort says how); the sort is in the address.
"use strict";

import { CONSOLE, api, badge, duration, el, enc, errorLine, link, preview, when } from "./dom.js";

export const PAGE = 50;
const STATUSES = ["", "queued", "running", "parked", "completed", "failed", "stalled",
                  "canceled", "budget_exhausted"];

export function runHref(runId) { return CONSOLE + "runs/" + enc(runId); }

function spentText(run) {
  const spent = run.spent;
  if (!spent) return "";
  const budgets = run.budgets || {};
  const parts = [];
  const usd = (micros) => "$" + (micros / 1e6).toFixed(4);
  if (spent.usd_micros || budgets.max_usd_micros) parts.push(usd(spent.usd_micros || 0) + (budgets.max_usd_micros ? " / " + usd(budgets.max_usd_micros) : ""));
  const tokens = (spent.input_tokens || 0) + (spent.output_tokens || 0);
  if (tokens || budgets.max_tokens) parts.push(`${tokens}${budgets.max_tokens ? " / " + budgets.max_tokens : ""} tok`);
  parts.push(`${spent.supersteps || 0}${budgets.max_supersteps ? " / " + budgets.max_supersteps : ""} steps`);
  return parts.join(" · ");
}

function outcomeText(run) {
  if (run.status === "parked" && run.waiting) {
    const what = run.waiting.map((w) => (w.approval ? "approval: " : "answer: ") + (w.prompt || w.node)).join("; ");
    return `waits for ${what || "a timer or a child"} · since ${when(run.updated_ms)} (${duration(Date.now() - run.updated_ms)})`;
  }
  const o = run.outcome;
  if (!o) return "";
  return [o.kind, o.node && `at ${o.node}`, o.detail || o.reason, o.axis && `axis ${o.axis}`].filter(Boolean).join(" · ");
}

function cells(run) {
  return [
    el("td", {}, link(runHref(run.run_id), run.run_id, { class: "mono", "data-run": "" })),
    el("td", { text: run.workflow }),
    el("td", {}, badge(run.status)),
    el("td", { text: preview(outcomeText(run), 160) }),
    el("td", { class: "mono", text: when(run.created_ms) }),
    el("td", { class: "mono", text: when(run.updated_ms) }),
    el("td", { text: duration(run.duration_ms) }),
    el("td", { text: run.principal }),
    el("td", { text: spentText(run) }),
  ];
}

function column(percent) {
  const col = el("col");
  col.style.width = percent + "%";  // CSSOM, not a style attribute: the CSP allows no inline style
  return col;
}

export function runsView(view, params, go) {
  const form = el("form", { class: "row", role: "search" });
  const status = el("select", { id: "f-status", name: "status" });
  for (const s of STATUSES) status.append(el("option", { value: s, text: s || "any status" }));
  status.value = params.get("status") || "";
  const workflow = el("input", { id: "f-workflow", name: "workflow", size: "14", value: params.get("workflow") || "" });
  const q = el("input", { id: "f-q", name: "q", type: "search", size: "18", value: params.get("q") || "" });
  const since = el("input", { id: "f-since", name: "since", type: "datetime-local", value: params.get("since") || "" });
  form.append(
    el("label", { for: "f-status", text: "Status" }), status,
    el("label", { for: "f-workflow", text: "Workflow" }), workflow,
    el("label", { for: "f-q", text: "Search (/)" }), q,
    el("label", { for: "f-since", text: "Created since (UTC)" }), since,
    el("button", { class: "primary", text: "Apply" }));
  const line = errorLine();
  const body = el("tbody", { id: "runs" });
  const sort = params.get("sort") === "updated" ? "updated" : "created";
  const order = params.get("order") === "asc" ? "asc" : "desc";
  function sortable(title, by) {
    // A header button: sorts by this column newest first, or flips the order if it already does.
    const current = sort === by;
    const th = el("th", { "aria-sort": current ? (order === "asc" ? "ascending" : "descending") : "none" });
    const arrow = current ? (order === "asc" ? " \u25B2" : " \u25BC") : "";
    const button = el("button", { type: "button", class: "sort", id: "sort-" + by, text: title + arrow });
    button.addEventListener("click", () => {
      const flipped = current && order === "desc" ? "asc" : "desc";
      go("runs?" + query({ sort: by, order: flipped }));
    });
    th.append(button);
    return th;
  }
  const plain = (t) => el("th", { text: t });
  const table = el("table", {},
    el("colgroup", {}, ...[15, 9, 9, 20, 11, 11, 7, 7, 11].map(column)),
    el("thead", {}, el("tr", {}, ...["run", "workflow", "status", "outcome / waiting"].map(plain),
                       sortable("started (UTC)", "created"), sortable("updated (UTC)", "updated"),
                       ...["duration", "by", "spent / budget"].map(plain))),
    body);
  const first = el("button", { text: "First page", type: "button" });
  const next = el("button", { text: "Next page", type: "button" });
  const count = el("span", { class: "muted" });
  view.append(el("section", {}, el("h2", { text: "Runs" }), form, line, table,
                 el("div", { class: "pager" }, first, next, count)));

  function query(extra) {
    const out = new URLSearchParams();
    if (status.value) out.set("status", status.value);
    if (workflow.value.trim()) out.set("workflow", workflow.value.trim());
    if (q.value.trim()) out.set("q", q.value.trim());
    if (since.value) out.set("since", since.value);
    if (params.get("updated_since")) out.set("updated_since", params.get("updated_since"));
    if (sort !== "created") out.set("sort", sort);
    if (order !== "desc") out.set("order", order);
    for (const [k, v] of Object.entries(extra || {})) out.set(k, v);
    return out;
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); go("runs?" + query()); });
  status.addEventListener("change", () => go("runs?" + query()));
  let typing = null;
  q.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => go("runs?" + query(), { replace: true, keepFocus: true }), 300);
  });

  const rows = new Map();  // run id -> row: updated in place on refresh
  let nextCursor = null;
  let selected = -1;

  function apiQuery() {
    const out = new URLSearchParams({ limit: String(PAGE) });
    for (const key of ["status", "workflow", "q", "cursor"]) if (params.get(key)) out.set(key, params.get(key));
    if (params.get("since")) out.set("since", String(Date.parse(params.get("since") + "Z")));
    if (params.get("updated_since")) out.set("updated_since", String(Date.parse(params.get("updated_since") + "Z")));
    out.set("sort", sort);
    out.set("order", order);
    return out;
  }

  async function load() {
    const page = await api("GET", "runs?" + apiQuery());
    nextCursor = page.next_cursor;
    next.disabled = !nextCursor;
    first.disabled = !params.get("cursor");
    const seen = new Set();
    let previous = null;
    for (const run of page.runs) {
      seen.add(run.run_id);
      let row = rows.get(run.run_id);
      const key = JSON.stringify(run);
      if (!row) {
        row = el("tr", { "data-run-id": run.run_id }, ...cells(run));
        row.dataset.key = key;
        rows.set(run.run_id, row);
      } else if (row.dataset.key !== key) {  // changed: its cells again, the row stays
        const focused = row.contains(document.activeElement);
        row.replaceChildren(...cells(run));
        row.dataset.key = key;
        if (focused) row.querySelector("a").focus();
      }
      if (previous ? previous.nextSibling !== row : body.firstChild !== row) {
        if (previous) previous.after(row); else body.prepend(row);
      }
      previous = row;
    }
    for (const [id, row] of rows) if (!seen.has(id)) { row.remove(); rows.delete(id); }
    count.textContent = page.runs.length ? `${page.runs.length} runs on this page` : "no runs match";
  }

  first.addEventListener("click", () => go("runs?" + query()));
  next.addEventListener("click", () => nextCursor && go("runs?" + query({ cursor: nextCursor })));

  function select(i) {
    const all = [...body.rows];
    if (!all.length) return;
    selected = Math.max(0, Math.min(i, all.length - 1));
    all.forEach((r, j) => r.classList.toggle("selected", j === selected));
    all[selected].querySelector("a").focus();
  }
  function keys(e) {
    if (e.target.matches("input, textarea, select")) return;
    if (e.key === "j") { select(selected + 1); e.preventDefault(); }
    else if (e.key === "k") { select(selected - 1); e.preventDefault(); }
    else if (e.key === "/") { q.focus(); e.preventDefault(); }
  }
  document.addEventListener("keydown", keys);

  let timer = null;
  const refresh = () => load().catch((e) => { line.textContent = e.message; });
  refresh();
  if (!params.get("cursor")) {
    timer = setInterval(() => { if (!document.hidden) refresh(); }, 5000);
  }
  return () => { clearInterval(timer); document.removeEventListener("keydown", keys); };
}
