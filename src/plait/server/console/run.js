// One run (/console/runs/ID, #superstep-N): its header and actions, the asks it waits on
// as inline forms, the plan drawn with live states, and the timeline of its journal loaded
// a page at a time (newest first, older on scroll). The event stream appends new items as
// they come; the header, graph and asks are re-read (small requests) after each burst.
"use strict";

import { askCard } from "./ask_card.js";
import { CONSOLE, ROOT, actingAs, acting, api, badge, duration, el, enc, errorLine, expandable, link,
         when } from "./dom.js";
import { drawGraph } from "./graph.js";
import { Timeline } from "./timeline.js";

const FINISHED = new Set(["completed", "failed", "stalled", "canceled", "budget_exhausted"]);

export function runView(view, runId, go) {
  const path = `runs/${enc(runId)}`;
  const state = { shown: null, drawing: null, asks: null, closed: false, stream: null, refreshing: null };

  const title = el("h2", {}, el("span", { class: "mono", id: "run-id", text: runId }),
                   el("span", { id: "run-status" }));
  const facts = el("div", { class: "muted", id: "run-facts" });
  const actions = el("div", { id: "actions" });
  const asksBox = el("div", { id: "run-asks" });
  const graphBox = el("div", { id: "graph" });
  const timeline = new Timeline(runId, { onFork: (superstep) => fork(superstep) });
  const summary = el("div", { id: "run-summary" });
  view.append(
    el("div", { class: "row" }, link(CONSOLE + "runs", "← all runs", { id: "back" })),
    el("section", {}, title, facts, actions),
    el("div", { class: "grid" },
      el("div", {},
        el("section", {}, el("h2", { text: "Waiting for a human" }), asksBox),
        el("section", {}, el("h2", {}, "Timeline ", el("span", { class: "muted", id: "stream-state" })),
           timeline.node)),
      el("div", {},
        el("section", {}, el("h2", { text: "Graph" }), graphBox),
        el("section", {}, el("h2", { text: "Outcome, spent, context" }), summary))));

  // --- actions: each disabled where it cannot apply, each with its error inline -----
  const cancelReason = el("input", { id: "cancel-reason", placeholder: "reason", size: "14" });
  const cancelBtn = el("button", { class: "danger", id: "cancel", text: "Cancel run" });
  const resumeBtn = el("button", { id: "resume", text: "Resume" });
  const verifyBtn = el("button", { id: "verify", text: "Verify" });
  const axis = el("select", { id: "budget-axis" });
  for (const a of ["usd", "tokens", "supersteps", "wall_s", "storage_bytes"]) axis.append(el("option", { text: a, value: a }));
  const amount = el("input", { id: "budget-value", type: "number", step: "any", size: "8" });
  const raiseBtn = el("button", { id: "raise-budget", text: "Raise budget" });
  const message = el("input", { id: "send-message", placeholder: "message (JSON or text)", size: "20" });
  const sendBtn = el("button", { id: "send", text: "Send" });
  const forkAt = el("input", { id: "fork-at", type: "number", min: "0", size: "4", placeholder: "step" });
  const forkBtn = el("button", { id: "fork", text: "Fork at superstep" });
  const actionLine = errorLine();
  actionLine.id = "action-error";
  const done = el("div", { class: "muted", id: "action-done", role: "status" });
  actions.append(
    el("div", { class: "row" }, resumeBtn, verifyBtn, cancelReason, cancelBtn),
    el("div", { class: "row" },
      el("label", { for: "budget-axis", text: "Budget" }), axis, amount, raiseBtn,
      el("label", { for: "send-message", text: "Message" }), message, sendBtn,
      el("label", { for: "fork-at", text: "Fork" }), forkAt, forkBtn),
    actionLine, done);

  async function command(button, sub, body, say) {
    done.textContent = "";
    const result = await acting(actionLine, button, () => api("POST", `${path}/${sub}`, body));
    if (result !== undefined) { done.textContent = say(result); refreshSoon(); follow(); }
    applyEnabled();
    return result;
  }
  resumeBtn.addEventListener("click", () => command(resumeBtn, "resume", undefined, (r) => `run is ${r.status}`));
  verifyBtn.addEventListener("click", () => command(verifyBtn, "verify", undefined,
    (r) => (r.verified ? `verified: ${r.checkpoints} checkpoints, up to ${r.up_to}` : `verification failed: ${r.error}`)));
  cancelBtn.addEventListener("click", () => {
    const body = { reason: cancelReason.value };
    if (actingAs()) body.as = actingAs();
    command(cancelBtn, "cancel", body, () => "cancel journaled");
  });
  raiseBtn.addEventListener("click", () => {
    const value = Number(amount.value);
    if (amount.value === "" || !Number.isFinite(value)) { actionLine.textContent = "a budget needs a number"; return; }
    command(raiseBtn, "raise-budget", { [axis.value]: value },
            (r) => `budget raised: ${JSON.stringify(r.budgets)}`);
  });
  sendBtn.addEventListener("click", () => {
    let value = message.value;
    try { value = JSON.parse(message.value); } catch (e) { /* plain text is a string */ }
    command(sendBtn, "send", { message: value }, () => "message journaled").then((r) => { if (r) message.value = ""; });
  });
  async function fork(superstep) {
    const body = {};
    if (superstep !== undefined && superstep !== "") body.at = Number(superstep);
    if (actingAs()) body.as = actingAs();
    const forked = await command(forkBtn, "fork", body, (r) => `forked as ${r.run_id}`);
    if (forked) go("runs/" + enc(forked.run_id));
  }
  forkBtn.addEventListener("click", () => fork(forkAt.value));

  function applyEnabled() {
    const status = state.shown ? state.shown.status : "";
    const finished = FINISHED.has(status);
    cancelBtn.disabled = !status || finished;
    resumeBtn.disabled = !status || (finished && status !== "budget_exhausted") || status === "running";
    sendBtn.disabled = !status || finished;
    raiseBtn.disabled = !status || (finished && status !== "budget_exhausted");
    forkBtn.disabled = !timeline.hasCheckpoint();
    verifyBtn.disabled = !status;
  }

  // --- header, outcome, graph, asks: small reads, re-done after each burst of events --
  // Two reads, each drawn as soon as it comes: the drawing (the plan, live states and the
  // run object as of its latest checkpoint) and the asks. Neither reads the whole journal.
  async function loadHeader() {
    await Promise.all([
      api("GET", `${path}/drawing`).then((drawing) => {
        if (state.closed) return;
        state.drawing = drawing;
        const shown = drawing.shown;
        state.shown = shown;
        $status(shown.status);
        drawFacts(drawing);
        drawGraph(graphBox, drawing, (node) => timeline.filterNode(node));
        if (state.asks) renderAsks(state.asks, drawing);
        summary.replaceChildren(
          el("div", {}, outcomeLine(shown)),
          el("div", { class: "muted" }, spentLine(shown.spent, drawing.budgets)),
          expandable("context", shown.context));
        applyEnabled();
      }),
      api("GET", `${path}/asks`).then((asks) => {
        if (state.closed) return;
        state.asks = asks.asks;
        if (state.drawing) renderAsks(state.asks, state.drawing);
      }),
    ]);
  }
  function drawFacts(drawing) {
    const run = drawing.run || {};
    facts.replaceChildren(
      `workflow ${run.workflow || ""} · started ${when(run.created_ms)} by ${run.principal || "?"}` +
      ` · updated ${when(run.updated_ms)} · ${duration(run.updated_ms - run.created_ms)}`);
    if (run.parent_run_id) {
      facts.append(" · child of ", link(CONSOLE + "runs/" + enc(run.parent_run_id), run.parent_run_id, { class: "mono" }));
    }
    if (run.children && run.children.length) {
      facts.append(" · child runs:");
      for (const child of run.children) {
        facts.append(" ", link(CONSOLE + "runs/" + enc(child.run_id), child.run_id, { class: "mono" }), ` (${child.status})`);
      }
    }
  }
  function $status(status) {
    const box = view.querySelector("#run-status");
    box.replaceChildren(badge(status));
  }
  function refreshSoon() {
    if (state.refreshing) return;
    state.refreshing = setTimeout(() => {
      state.refreshing = null;
      loadHeader().catch((e) => { actionLine.textContent = e.message; });
    }, 200);
  }

  function renderAsks(asks, drawing) {
    const open = new Set([...asksBox.querySelectorAll("[data-ask]")].map((n) => n.dataset.ask));
    const now = new Set(asks.map((a) => a.ask_id));
    if (asks.length && [...now].every((id) => open.has(id)) && open.size === now.size) return;  // keep typed text
    asksBox.replaceChildren();
    if (!asks.length) { asksBox.append(el("p", { class: "muted", text: "nothing pending" })); return; }
    const schemas = {};
    for (const node of drawing.nodes) if (node.schema) schemas[node.id] = node.schema;
    for (const ask of asks) asksBox.append(card(ask, schemas[ask.node]));
  }

  function card(ask, schema) {
    return askCard(ask, schema, {
      shownRunId: runId,
      onAnswered: (r, node) => { node.firstChild.textContent += "; following the run…"; refreshSoon(); follow(); },
    });
  }

  // --- the event stream: new items added to the timeline as they come -----------------
  const streamState = view.querySelector("#stream-state");
  async function follow() {
    if (state.closed) return;
    if (state.stream) state.stream.abort();
    const control = new AbortController();
    state.stream = control;
    streamState.textContent = "(live)";
    let ended = null;
    try {
      const response = await fetch(`${ROOT}${path}/events?after=${timeline.lastSeq}`, {
        headers: { "Authorization": "Bearer " + (sessionStorage.getItem("plait.token") || "") },
        signal: control.signal });
      if (!response.ok) throw new Error(`event stream: HTTP ${response.status}`);
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done: finished } = await reader.read();
        if (finished) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = parseFrame(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (!frame) continue;
          if (frame.event === "end") ended = frame.data;
          else if (frame.event !== "delta") { timeline.addNewer(frame.data); refreshSoon(); }
        }
      }
    } catch (e) {
      if (e.name === "AbortError") return;
      streamState.textContent = `(${e.message})`;
    }
    if (state.stream !== control || state.closed) return;
    state.stream = null;
    if (ended) { streamState.textContent = `(stream ended: run ${ended.status})`; refreshSoon(); }
    else { streamState.textContent = "(reconnecting…)"; setTimeout(() => { if (!state.stream) follow(); }, 2000); }
  }

  (async () => {
    try {
      await Promise.all([loadHeader(), timeline.loadFirst(location.hash)]);
      applyEnabled();
      follow();
    } catch (e) { actionLine.textContent = e.message; }
  })();
  return () => { state.closed = true; if (state.stream) state.stream.abort(); timeline.close(); };
}

function parseFrame(chunk) {
  let event = "message";
  let data = "";
  for (const line of chunk.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const at = line.indexOf(":");
    const field = at < 0 ? line : line.slice(0, at);
    let value = at < 0 ? "" : line.slice(at + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data += value;
  }
  return data ? { event, data: JSON.parse(data) } : null;
}

function outcomeLine(shown) {
  const o = shown.outcome;
  if (!o) return `status ${shown.status}`;
  return [`outcome ${o.kind}`, o.node && `at ${o.node}`, o.detail, o.axis && `axis ${o.axis}`].filter(Boolean).join(" · ");
}

function spentLine(spent, budgets) {
  if (!spent) return "";
  const b = budgets || {};
  const pair = (v, cap, unit) => `${v}${cap ? " / " + cap : ""}${unit}`;
  return [
    pair(spent.supersteps, b.max_supersteps, " supersteps"),
    pair((spent.input_tokens || 0) + (spent.output_tokens || 0), b.max_tokens, " tokens"),
    pair("$" + ((spent.usd_micros || 0) / 1e6).toFixed(4), b.max_usd_micros ? "$" + (b.max_usd_micros / 1e6).toFixed(4) : "", ""),
    `${duration(spent.wall_ms)} wall`,
  ].join(" · ");
}

