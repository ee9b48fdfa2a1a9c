// Building the page from API data: elements made one by one, text set as text (never
// markup), the API called with the session's token, and times written for people.
"use strict";

const TOKEN_KEY = "plait.token";
const AS_KEY = "plait.as";

// The API sits at the server's root: everything before /console/ in this page's address.
export const ROOT = location.pathname.slice(0, location.pathname.indexOf("/console/") + 1);
export const CONSOLE = ROOT + "console/";
export const enc = encodeURIComponent;

export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  setProps(node, props);
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
export function svg(tag, props, ...children) {
  const node = document.createElementNS(SVG, tag);
  setProps(node, props);
  for (const child of children) if (child) node.append(child);
  return node;
}

function setProps(node, props) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.setAttribute("class", v);
    else node.setAttribute(k, v === true ? "" : v);
  }
}

export const $ = (id) => document.getElementById(id);

export function token() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(value) { sessionStorage.setItem(TOKEN_KEY, value); }
export function forgetToken() { sessionStorage.removeItem(TOKEN_KEY); }

// Who approves: the principal the token is bound to (GET /me), else a name given once
// in this tab (sessionStorage).
export const me = { principal: null, role: null, known: false };
export function actingAs() { return me.principal || sessionStorage.getItem(AS_KEY) || ""; }
export function setActingAs(name) { sessionStorage.setItem(AS_KEY, name); }

export class ApiError extends Error {
  constructor(status, code, message) {
    super(code ? `${code} ${message}` : message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body, signal) {
  const headers = { "Authorization": "Bearer " + (token() || "") };
  const init = { method, headers, signal };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(ROOT + path, init);
  const text = await response.text();
  let data = null;
  try { data = JSON.parse(text); } catch (e) { data = null; }
  if (!response.ok) {
    const error = data && data.error;
    if (response.status === 401) document.dispatchEvent(new Event("plait:unauthorized"));
    throw new ApiError(response.status, error ? error.code : "",
                       error ? error.message : `HTTP ${response.status}`);
  }
  return data;
}

export function notice(text, kind) {
  const box = $("notice");
  box.textContent = text || "";
  box.className = text ? kind || "error" : "";
}

// An inline error line for a form: shows the PLAIT-E code and message where the action was.
export function errorLine() { return el("div", { class: "error", role: "alert" }); }

export async function acting(line, button, work) {
  line.textContent = "";
  if (button) button.disabled = true;
  try { return await work(); }
  catch (e) { line.textContent = e.message; return undefined; }
  finally { if (button) button.disabled = false; }
}

export function badge(status) {
  return el("span", { class: "status s-" + status, text: status });
}

export function when(ms) {
  if (!ms && ms !== 0) return "";
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

export function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "";
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function preview(value, n) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  if (text === undefined) return "";
  return text.length > n ? text.slice(0, n) + "…" : text;
}

// A value that may be large, shown in pages of PAGE characters (never cut): the first
// page when opened, the next on "more".
const PAGE = 20000;
export function expandable(label, value) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  const box = el("details", {}, el("summary", { text: `${label} (${text.length} chars)` }));
  let shown = 0;
  const pre = el("pre");
  const more = el("button", { text: "more", type: "button" });
  function page() {
    pre.append(document.createTextNode(text.slice(shown, shown + PAGE)));
    shown += PAGE;
    more.hidden = shown >= text.length;
    more.textContent = `more (${Math.max(0, text.length - shown)} chars left)`;
  }
  more.addEventListener("click", page);
  box.addEventListener("toggle", () => { if (box.open && !shown) { box.append(pre, more); page(); } });
  return box;
}

export function link(href, text, props) {
  return el("a", { href, text, ...(props || {}) });
}
