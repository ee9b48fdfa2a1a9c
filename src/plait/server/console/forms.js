// Forms built from JSON Schemas (a workflow's input, an ask's answer): a field per property
// of an object schema (text, number, checkbox, a choice for an enum), a JSON text area for
// anything else. The server checks the value against the schema (PLAIT-E028, E027).
"use strict";

import { el } from "./dom.js";

let counter = 0;

function field(name, schema, required) {
  const id = `f${++counter}`;
  const title = (schema.title || name) + (required ? " *" : "");
  const label = el("label", { for: id, text: title });
  let input;
  let read;
  if (Array.isArray(schema.enum)) {
    input = el("select", { id, name });
    for (const option of schema.enum) input.append(el("option", { value: JSON.stringify(option), text: String(option) }));
    read = () => JSON.parse(input.value);
  } else if (schema.type === "boolean") {
    input = el("input", { id, name, type: "checkbox" });
    read = () => input.checked;
  } else if (schema.type === "integer" || schema.type === "number") {
    input = el("input", { id, name, type: "number", step: schema.type === "integer" ? "1" : "any" });
    read = () => (input.value === "" ? undefined : Number(input.value));
  } else if (schema.type === "string") {
    input = el("input", { id, name, type: "text", size: "40" });
    read = () => (input.value === "" && !required ? undefined : input.value);
  } else {
    input = el("textarea", { id, name, placeholder: "JSON" });
    read = () => (input.value.trim() === "" ? undefined : JSON.parse(input.value));
  }
  if (schema.description) input.setAttribute("title", schema.description);
  return { node: el("div", { class: "row" }, label, input), read, name };
}

// A form for ``schema``: {node, value()}; value() throws a readable error for bad JSON.
export function schemaForm(schema) {
  const props = schema && schema.type === "object" && schema.properties;
  if (!props || !Object.keys(props).length) {
    const id = `f${++counter}`;
    const area = el("textarea", { id, placeholder: "a JSON value" });
    return {
      node: el("div", {}, el("label", { for: id, text: "Value (JSON)" }), area),
      value() {
        if (area.value.trim() === "") return null;
        try { return JSON.parse(area.value); } catch (e) { throw new Error("not valid JSON: " + e.message); }
      },
    };
  }
  const required = new Set(schema.required || []);
  const fields = Object.keys(props).map((name) => field(name, props[name] || {}, required.has(name)));
  return {
    node: el("fieldset", {}, ...fields.map((f) => f.node)),
    value() {
      const out = {};
      for (const f of fields) {
        let v;
        try { v = f.read(); } catch (e) { throw new Error(`${f.name}: not valid JSON: ${e.message}`); }
        if (v !== undefined) out[f.name] = v;
      }
      return out;
    },
  };
}
