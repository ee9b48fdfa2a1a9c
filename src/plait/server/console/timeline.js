// A run's journal as a timeline, grouped by superstep (#superstep-N), loaded a page at a
// time from GET /runs/ID/journal: the newest page first, older pages as the reader scrolls
// to the end (or presses "Load older"), new items from the event stream on top. Only
// what was loaded is in the page, so a run of 100,000 items opens like one of 10.
"use strict";

import { api, badge, duration, el, enc, expandable, preview, when } from "./dom.js";

const PAGE = 200;

function keyText(key) {
  return [key.task_path, key.node, key.attempt, key.effect_seq, key.kind].join("\u0000");
}

// "pass 3 · attempt 1": the node's loop pass (a new generation, not a retry) and its try
// within it, as the server placed them; the journal key's own attempt (counting across
// passes) where it could not.
function tryText(item) {
  if (item.generation === undefined) return `attempt ${item.key.attempt}`;
  return `pass ${item.generation + 1} · attempt ${item.pass_attempt}`;
}

export class Timeline {
  constructor(runId, hooks) {
    this.runId = runId;
    this.hooks = hooks;
    this.groups = new Map();  // superstep -> {node, list}
    this.rows = new Map();    // key text -> intent row
    this.results = new Map(); // key text -> result item whose intent is not loaded yet
    this.intents = new Map(); // key text -> intent item
    this.lastSeq = 0;
    this.before = null;
    this.done = false;
    this.checkpoints = 0;
    this.lastStep = 0;
    this.newest = 0;
    this.orphans = [];  // records read before the step they belong to (pages go newest first)
    this.list = el("div", { class: "timeline", id: "timeline", tabindex: "0", "aria-label": "timeline" });
    this.filter = el("div", { class: "row", hidden: true });
    this.older = el("button", { id: "load-older", text: "Load older", type: "button" });
    this.end = el("div", { class: "muted pager" }, this.older);
    this.older.addEventListener("click", () => this.loadOlder());
    this.list.append(this.end);
    this.node = el("div", {}, this.filter, this.list);
    this.observer = new IntersectionObserver((seen) => {
      if (seen.some((e) => e.isIntersecting)) this.loadOlder();
    }, { root: this.list });
  }

  hasCheckpoint() { return this.checkpoints > 0; }
  close() { this.observer.disconnect(); }

  async loadFirst(hash) {
    await this.page(null);
    this.observer.observe(this.end);
    const wanted = /^#superstep-(\d+)$/.exec(hash || "");
    if (wanted) await this.reveal(Number(wanted[1]));
  }

  async reveal(step) {
    while (!this.groups.has(step) && !this.done) await this.page(this.before);
    const group = this.groups.get(step);
    if (group) { group.node.scrollIntoView({ block: "start" }); group.head.focus(); }
  }

  async loadOlder() {
    if (this.done || this.loading) return;
    await this.page(this.before);
  }

  async page(before) {
    this.loading = true;
    try {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (before !== null) q.set("before", String(before));
      const page = await api("GET", `runs/${enc(this.runId)}/journal?${q}`);
      for (const item of page.items) this.add(item, false);
      this.before = page.next_before;
      this.done = page.next_before === null;
      this.older.hidden = this.done;
      if (this.done) this.flushOrphans();
      if (this.done && !this.end.querySelector(".first")) this.end.append(el("span", { class: "first", text: "the run's first item" }));
    } finally { this.loading = false; }
  }

  addNewer(item) {
    if (item.seq <= this.lastSeq) return;
    this.add(item, true);
  }

  group(step) {
    let g = this.groups.get(step);
    if (g) return g;
    const head = el("div", { class: "step", id: `superstep-${step}`, tabindex: "-1" },
                    el("a", { href: `#superstep-${step}`, text: `superstep ${step}` }));
    g = { node: el("div", { "data-superstep": String(step) }, head), head, list: el("div") };
    g.node.append(g.list);
    this.groups.set(step, g);
    const others = [...this.groups.keys()].filter((s) => s !== step).sort((a, b) => b - a);
    const below = others.find((s) => s < step);
    if (below !== undefined) this.groups.get(below).node.before(g.node);
    else this.end.before(g.node);
    return g;
  }

  add(item, newer) {
    this.lastSeq = Math.max(this.lastSeq, item.seq);
    if (item.type === "result") { this.addResult(item); return; }
    const has = item.superstep !== undefined && item.superstep !== null;
    if (!has && !newer) { this.orphans.push(item); return; }  // placed with the next older step
    const step = has ? item.superstep : this.newest;
    this.newest = Math.max(this.newest, step);
    this.lastStep = step;
    this.place(item, step);
    if (has && this.orphans.length) {
      const waiting = this.orphans;
      this.orphans = [];
      for (const orphan of waiting) this.place(orphan, step);
    }
  }

  flushOrphans() {
    const waiting = this.orphans;
    this.orphans = [];
    for (const orphan of waiting) this.place(orphan, this.lastStep);
  }

  place(item, step) {
    const g = this.group(step);
    const row = item.type === "intent" ? this.intentRow(item)
      : item.type === "checkpoint" ? this.checkpointRow(item) : this.recordRow(item);
    row.dataset.seq = String(item.seq);
    // Rows are in seq order, newest first, within the group.
    const rows = [...g.list.children];
    const after = rows.find((r) => Number(r.dataset.seq) < item.seq);
    if (after) after.before(row); else g.list.append(row);
  }

  intentRow(item) {
    const key = item.key;
    const k = keyText(key);
    this.intents.set(k, item);
    const where = key.node + (key.task_path ? ` · task ${key.task_path}` : "");
    const row = el("div", { class: "effect", "data-node": key.node },
      el("div", { class: "row" },
        el("span", { class: "mono muted", text: when(item.clock_ms).slice(11) }),
        el("strong", { text: where }),
        el("span", { text: `${key.kind}${item.executor && item.executor !== key.kind ? ": " + item.executor : ""}` }),
        el("span", { class: "muted try", text: `${tryText(item)} · effect ${key.effect_seq}` }),
        el("span", { class: "state" }, badge("pending")),
        el("span", { class: "took muted" })));
    if (key.kind === "llm" && item.input && Array.isArray(item.input.messages)) row.append(transcript(item.input.messages));
    else row.append(expandable("input", item.input));
    this.rows.set(k, row);
    const result = this.results.get(k);
    if (result) { this.results.delete(k); this.fill(row, item, result); }
    return row;
  }

  addResult(item) {
    const k = keyText(item.key);
    const row = this.rows.get(k);
    if (row) this.fill(row, this.intents.get(k), item);
    else this.results.set(k, item);
  }

  fill(row, intent, result) {
    const outcome = result.outcome || {};
    const failed = outcome.Failed;
    const completed = outcome.Completed;
    row.querySelector(".state").replaceChildren(badge(failed ? "failed" : "completed"));
    row.querySelector(".took").textContent = duration(result.clock_ms - intent.clock_ms);
    if (failed) row.append(el("div", { class: "error", text: `${failed.cause}: ${preview(failed.detail, 400)}` }));
    if (completed) {
      const usage = completed.usage;
      if (usage && (usage.input_tokens || usage.output_tokens)) {
        row.append(el("div", { class: "muted", text:
          `${usage.input_tokens} in / ${usage.output_tokens} out tokens · $${((usage.usd_micros || 0) / 1e6).toFixed(6)}` }));
      }
      row.append(expandable("output", completed.result));
    }
  }

  checkpointRow(item) {
    this.checkpoints += 1;
    const fork = el("button", { type: "button", text: `Fork at superstep ${item.superstep}`, "data-fork": String(item.superstep) });
    fork.addEventListener("click", () => this.hooks.onFork(item.superstep));
    return el("div", { class: "row muted checkpoint" },
      el("span", { text: `checkpoint · superstep ${item.superstep} · ${item.size} bytes` }), fork);
  }

  recordRow(item) {
    return el("div", { class: "record" },
      el("span", { class: "muted", text: `record ${item.kind} ` }), expandable("body", item.body));
  }

  filterNode(node) {
    for (const row of this.list.querySelectorAll(".effect")) row.hidden = row.dataset.node !== node;
    const all = el("button", { type: "button", text: "show every node" });
    all.addEventListener("click", () => {
      for (const row of this.list.querySelectorAll(".effect")) row.hidden = false;
      this.filter.hidden = true;
    });
    this.filter.replaceChildren(el("span", { id: "node-filter", text: `effects of node ${node} (loaded so far)` }), all);
    this.filter.hidden = false;
  }
}

function transcript(messages) {
  const box = el("details", { class: "transcript" }, el("summary", { text: `chat transcript (${messages.length} messages)` }));
  box.addEventListener("toggle", () => {
    if (!box.open || box.dataset.drawn) return;
    box.dataset.drawn = "1";
    for (const m of messages) {
      const turn = el("div", { class: "turn" }, el("span", { class: "role", text: `${m.role || "?"}: ` }));
      const content = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
      turn.append(el("span", { text: preview(content || "", 2000) }));
      if (m.tool_calls) turn.append(expandable("tool calls", m.tool_calls));
      box.append(turn);
    }
  });
  return box;
}
