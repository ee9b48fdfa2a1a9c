// Starting a run (/console/start?workflow=FILE): the form is built from the input schema
// of the workflow's entry tool (GET /workflows/input?path=FILE); POST /runs queues the run
// and the console goes to it.
"use strict";

import { actingAs, api, el, enc, errorLine } from "./dom.js";
import { schemaForm } from "./forms.js";

export function startView(view, params, go) {
  const path = el("input", { id: "start-workflow", size: "50", value: params.get("workflow") || "" });
  const load = el("button", { class: "primary", text: "Load form" });
  const line = errorLine();
  const formBox = el("div");
  const choose = el("form", { class: "row" },
    el("label", { for: "start-workflow", text: "Workflow file (on the server)" }), path, load);
  view.append(el("section", {}, el("h2", { text: "Start a run" }), choose, line, formBox));
  choose.addEventListener("submit", (e) => {
    e.preventDefault();
    go("start?workflow=" + enc(path.value.trim()), { replace: true });
  });
  if (!params.get("workflow")) { path.focus(); return () => {}; }

  (async () => {
    let described;
    try { described = await api("GET", "workflows/input?path=" + enc(params.get("workflow"))); }
    catch (e) { line.textContent = e.message; return; }
    const form = schemaForm(described.input_schema);
    const runId = el("input", { id: "start-run-id", size: "30" });
    const submit = el("button", { class: "primary", text: "Start run" });
    const submitLine = errorLine();
    const startForm = el("form", { id: "start-form" },
      el("h3", { text: `${described.workflow} — input of its entry node '${described.entry}'` }),
      form.node,
      el("div", { class: "row" }, el("label", { for: "start-run-id", text: "Run id (optional)" }), runId),
      el("div", { class: "row" }, submit), submitLine);
    formBox.replaceChildren(startForm);
    startForm.addEventListener("submit", async (e) => {
      e.preventDefault();
      submitLine.textContent = "";
      let input;
      try { input = form.value(); } catch (err) { submitLine.textContent = err.message; return; }
      const body = { workflow: params.get("workflow"), input };
      if (runId.value.trim()) body.run_id = runId.value.trim();
      if (actingAs()) body.as = actingAs();
      submit.disabled = true;
      try {
        const run = await api("POST", "runs", body);
        go("runs/" + enc(run.run_id));
      } catch (err) { submitLine.textContent = err.message; }
      finally { submit.disabled = false; }
    });
  })();
  return () => {};
}
