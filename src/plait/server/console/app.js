// The console's entry: the token, who you are (GET /me), and the address -> view router.
// Views: runs (the list), runs/ID (one run), asks (every pending ask), start (a form to
// start a run). Links under
// /console/ are followed without reloading; back/forward and reload draw the same view.
"use strict";

import { $, CONSOLE, actingAs, api, el, forgetToken, me, notice, setActingAs, setToken, token } from "./dom.js";
import { runView } from "./run.js";
import { runsView } from "./runs.js";
import { startView } from "./start.js";
import { asksView } from "./waiting.js";

let cleanup = () => {};
let drawnPath = null;

function go(relative, opts) {
  const url = relative.startsWith("/") ? relative : CONSOLE + relative;
  if (opts && opts.replace) history.replaceState(null, "", url); else history.pushState(null, "", url);
  render(opts);
}

function render(opts) {
  if (!token()) { showLogin(); return; }
  $("login").hidden = true;
  $("forget").hidden = false;
  const rest = location.pathname.slice(CONSOLE.length);
  const params = new URLSearchParams(location.search);
  const view = $("view");
  if (opts && opts.keepFocus && drawnPath === "runs" && rest === "runs") {
    // Typing in the search box: the list redraws under it, the box keeps its focus.
    const focused = document.activeElement && document.activeElement.id;
    cleanup(); view.replaceChildren(); cleanup = runsView(view, params, go);
    if (focused && $(focused)) { $(focused).focus(); const f = $(focused); if (f.setSelectionRange && f.type !== "number") f.setSelectionRange(f.value.length, f.value.length); }
    return;
  }
  cleanup();
  view.replaceChildren();
  notice("");
  const match = /^runs\/([^/]+)$/.exec(rest);
  if (match) {
    drawnPath = "run";
    document.title = "plait · run " + decodeURIComponent(match[1]);
    cleanup = runView(view, decodeURIComponent(match[1]), go);
  } else if (rest === "asks") {
    drawnPath = "asks";
    document.title = "plait · waiting for a human";
    cleanup = asksView(view);
  } else if (rest === "start") {
    drawnPath = "start";
    document.title = "plait · start a run";
    cleanup = startView(view, params, go);
  } else {
    drawnPath = "runs";
    document.title = "plait · runs";
    cleanup = runsView(view, params, go);
  }
}

function showLogin() {
  cleanup(); cleanup = () => {};
  $("view").replaceChildren();
  $("login").hidden = false;
  $("forget").hidden = true;
  $("token").focus();
}

async function whoAmI() {
  const box = $("me");
  try {
    const found = await api("GET", "me");
    me.principal = found.principal || null;
    me.role = found.role || null;
  } catch (e) { me.principal = null; }
  if (me.principal) { box.replaceChildren(`signed in as ${me.principal}` + (me.role ? ` (${me.role})` : "")); return; }
  const name = el("input", { id: "acting-as", size: "12", value: actingAs(), placeholder: "your name" });
  name.addEventListener("change", () => setActingAs(name.value.trim()));
  box.replaceChildren(el("label", { for: "acting-as", text: "Acting as " }), name);
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[href]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith(CONSOLE)) return;
  if (url.pathname === location.pathname && url.search === location.search && url.hash) return;  // a jump
  e.preventDefault();
  go(url.pathname + url.search + url.hash);
});
window.addEventListener("popstate", () => render());
window.addEventListener("hashchange", () => {
  const target = location.hash && document.getElementById(location.hash.slice(1));
  if (target) target.scrollIntoView({ block: "start" });
});
document.addEventListener("plait:unauthorized", () => {
  forgetToken();
  showLogin();
  notice("the token was refused");
});
$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const value = $("token").value.trim();
  if (!value) return;
  setToken(value);
  $("token").value = "";
  whoAmI();
  render();
});
$("forget").addEventListener("click", () => { forgetToken(); showLogin(); });
$("home").href = CONSOLE + "runs";
$("nav-runs").href = CONSOLE + "runs";
$("nav-asks").href = CONSOLE + "asks";
$("nav-parked").href = CONSOLE + "runs?status=parked";
$("nav-start").href = CONSOLE + "start";
if (token()) whoAmI();
render();
