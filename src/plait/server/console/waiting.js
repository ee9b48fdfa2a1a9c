// "Waiting for a human" (/console/asks): the pending asks of parked runs, those waiting
// longest first, a page of PAGE runs at a time (GET /asks?limit; "Show more" adds the next
// page), each an inline form (ask_card.js, the run view's own). An ask that is not an
// approval gets its form from its node's answer schema, read from its run's drawing (one
// request per run that has such asks). The pages shown are read again every 5 seconds:
// new asks are added and answered ones go, and a card being filled in is never redrawn.
"use strict";

import { askCard } from "./ask_card.js";
import { api, el, enc, errorLine } from "./dom.js";

const PAGE = 50;  // parked runs a page of asks covers

export function asksView(view) {
  const list = el("div", { id: "asks" });
  const count = el("p", { class: "muted", id: "asks-count" });
  const line = errorLine();
  const more = el("button", { type: "button", id: "asks-more", text: "Show more" });
  more.hidden = true;
  view.append(el("section", {}, el("h2", { text: "Waiting for a human" }), count, line, list,
                 el("div", { class: "pager" }, more)));
  let pages = 1;  // how many pages are shown (and read again)

  const cards = new Map();  // "run id \0 ask id" -> its card, kept while the ask is pending
  const schemas = new Map();  // run id -> Promise of {node id: answer schema}

  function schemasOf(runId) {
    if (!schemas.has(runId)) {
      schemas.set(runId, api("GET", `runs/${enc(runId)}/drawing`).then((drawing) => {
        const out = {};
        for (const node of drawing.nodes) if (node.schema) out[node.id] = node.schema;
        return out;
      }));
    }
    return schemas.get(runId);
  }

  async function read() {
    const asks = [];
    let cursor = null;
    for (let page = 0; page < pages; page++) {
      const query = new URLSearchParams({ limit: String(PAGE) });
      if (cursor) query.set("cursor", cursor);
      const got = await api("GET", "asks?" + query);
      asks.push(...got.asks);
      cursor = got.next_cursor;
      if (!cursor) break;
    }
    return { asks, more: Boolean(cursor) };
  }

  async function load() {
    const { asks, more: left } = await read();
    more.hidden = !left;
    const pending = new Set();
    for (const ask of asks) {
      const key = ask.run_id + "\u0000" + ask.ask_id;
      pending.add(key);
      if (cards.has(key)) continue;
      const schema = ask.approval ? undefined : (await schemasOf(ask.run_id))[ask.node];
      if (cards.has(key)) continue;  // added by a load that overlapped this one
      const card = askCard(ask, schema, { onAnswered: () => {} });  // goes at the next read
      cards.set(key, card);
      list.append(card);
    }
    for (const [key, card] of cards) {
      if (!pending.has(key) && !card.contains(document.activeElement)) { card.remove(); cards.delete(key); }
    }
    const shown = `${asks.length} ask${asks.length === 1 ? "" : "s"} pending`;
    count.textContent = left
      ? `${shown} in the ${pages * PAGE} runs parked longest; more below`
      : asks.length ? shown : "nothing pending: no run waits for a human";
  }

  const refresh = () => load().then(() => { line.textContent = ""; }, (e) => { line.textContent = e.message; });
  more.addEventListener("click", () => { pages += 1; refresh(); });
  refresh();
  const timer = setInterval(() => { if (!document.hidden) refresh(); }, 5000);
  return () => clearInterval(timer);
}
