// An ask as an inline form (no pop-ups), for the run view and the "Waiting for a human"
// view alike: an approval has Approve and Deny (a denial needs a reason); any other ask a
// form built from its answer schema with Answer and Refuse. A refused action shows its
// PLAIT-E code in the card; the approver is the token's principal, or the name typed once.
"use strict";

import { CONSOLE, actingAs, acting, api, el, enc, errorLine, expandable, link, me, setActingAs,
         when } from "./dom.js";
import { schemaForm } from "./forms.js";

// `shownRunId`: the run the page shows (an ask of another run links it; null: always);
// `onAnswered(reply)`: called once the server took the answer.
export function askCard(ask, schema, { shownRunId = null, onAnswered }) {
  const line = errorLine();
  const askPath = `runs/${enc(ask.run_id)}/asks/${enc(ask.ask_id)}`;
  const reason = el("input", { placeholder: ask.approval ? "reason (needed to deny)" : "reason (needed to refuse)", size: "24", "aria-label": "reason" });
  const runLink = link(CONSOLE + "runs/" + enc(ask.run_id), ask.run_id, { class: "mono" });
  const card = el("div", { class: "ask", "data-ask": ask.ask_id, "data-run-id": ask.run_id },
    el("div", { class: "row" }, el("strong", { text: ask.prompt || "(no prompt)" }),
       el("span", { class: "muted", text: `node ${ask.node}` + (ask.tool_name ? ` · tool ${ask.tool_name}` : "") })),
    shownRunId === null ? el("div", {}, "run ", runLink)
      : ask.run_id !== shownRunId ? el("div", {}, "in child run ", runLink) : "",
    ask.input !== undefined ? expandable("input", ask.input) : "",
    ask.expires_at ? el("div", { class: "muted", text: "expires " + when(ask.expires_at * 1000) }) : "");
  const who = el("input", { size: "14", value: actingAs(), "aria-label": "your name", placeholder: "your name" });
  const whoRow = el("div", { class: "row" }, el("span", { text: me.principal ? `acting as ${me.principal}` : "You are" }));
  if (!me.principal) whoRow.append(who);
  card.append(whoRow);
  function body(extra) {
    const out = { ...extra };
    const name = me.principal || who.value.trim() || actingAs();  // typed once, in any card
    if (!me.principal && name) { setActingAs(name); out.as = name; }
    return out;
  }
  const answered = (r) => {
    card.replaceChildren(el("div", { class: "muted", text: `answered by ${r.by}` }));
    onAnswered(r, card);
  };
  if (ask.approval) {
    const approve = el("button", { class: "primary", text: "Approve" });
    const deny = el("button", { class: "danger", text: "Deny" });
    approve.addEventListener("click", async () => {
      const r = await acting(line, approve, () => api("POST", `${askPath}/approve`, body(reason.value ? { reason: reason.value } : {})));
      if (r) answered(r);
    });
    deny.addEventListener("click", async () => {
      if (!reason.value.trim()) { line.textContent = "a denial needs a reason"; reason.focus(); return; }
      const r = await acting(line, deny, () => api("POST", `${askPath}/deny`, body({ reason: reason.value })));
      if (r) answered(r);
    });
    card.append(el("div", { class: "row" }, reason, approve, deny));
  } else {
    const form = schemaForm(schema);
    const send = el("button", { class: "primary", text: "Answer" });
    const refuse = el("button", { class: "danger", text: "Refuse" });
    send.addEventListener("click", async () => {
      let result;
      try { result = form.value(); } catch (e) { line.textContent = e.message; return; }
      const r = await acting(line, send, () => api("POST", `${askPath}/respond`, body({ result })));
      if (r) answered(r);
    });
    refuse.addEventListener("click", async () => {
      if (!reason.value.trim()) { line.textContent = "a refusal needs a reason"; reason.focus(); return; }
      const r = await acting(line, refuse, () => api("POST", `${askPath}/respond`, body({ deny: reason.value })));
      if (r) answered(r);
    });
    card.append(form.node, el("div", { class: "row" }, send, reason, refuse));
  }
  card.append(line);
  return card;
}
