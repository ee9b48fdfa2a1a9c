// The plan drawn as SVG from the server's layout (GET /runs/ID/drawing): nodes coloured
// and labelled by live state, edges by fired/dead, loop passes counted, the node in flight
// outlined; a node is a button (click, Enter or Space) that shows its effects.
"use strict";

import { el, svg } from "./dom.js";

const IN_FLIGHT = new Set(["Dispatched", "AwaitingClient", "Ready"]);

function ends(d) {
  const numbers = d.match(/-?\d+(\.\d+)?/g).map(Number);
  return [numbers[0], numbers[1], numbers[numbers.length - 2], numbers[numbers.length - 1]];
}

export function drawGraph(box, drawing, choose) {
  const chosen = box.querySelector(".node.chosen");
  const chosenId = chosen ? chosen.dataset.node : null;
  const picture = svg("svg", { class: "graph", viewBox: `0 0 ${drawing.width} ${drawing.height}`,
                              role: "group", "aria-label": "the workflow graph" });
  picture.append(svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 8 8", refX: "8", refY: "4",
    markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" }, svg("path", { d: "M0,0 L8,4 L0,8 z", fill: "#7b8590" }))));
  for (const edge of drawing.edges) {
    const [x1, y1, x2, y2] = ends(edge.d);
    const label = [edge.label, edge.state, edge.fired > 1 ? `×${edge.fired}` : ""].filter(Boolean).join(" ");
    const g = svg("g", { class: `edge ${edge.state}`, "data-edge": `${edge.from}->${edge.to}` },
      svg("title", { text: `${edge.from} → ${edge.to}: ${label}` }),
      svg("path", { d: edge.d, "marker-end": "url(#arrow)" }),
      svg("text", { x: String(edge.loop ? Math.max(x1, x2) + 4 : (x1 + x2) / 2 + 4), y: String((y1 + y2) / 2), text: label }));
    picture.append(g);
  }
  for (const node of drawing.nodes) {
    const flight = IN_FLIGHT.has(node.state) ? " inflight" : "";
    const passes = node.generation > 0 ? ` · pass ${node.generation + 1}` : "";
    const retry = node.attempt > 1 ? ` · attempt ${node.attempt}` : "";
    const g = svg("g", { class: `node s-${node.state}${flight}${node.id === chosenId ? " chosen" : ""}`,
                        tabindex: "0", role: "button", "data-node": node.id, "data-state": node.state,
                        "aria-label": `node ${node.id}: ${node.state}${passes}${retry}` },
      svg("rect", { x: String(node.x), y: String(node.y), width: String(node.w), height: String(node.h) }),
      svg("text", { x: String(node.x + 8), y: String(node.y + 17), text: clipText(node.id, 22) }),
      svg("text", { class: "state", x: String(node.x + 8), y: String(node.y + 34), text: `${node.state}${passes}${retry}` }));
    const pick = () => {
      picture.querySelectorAll(".node.chosen").forEach((n) => n.classList.remove("chosen"));
      g.classList.add("chosen");
      choose(node.id);
    };
    g.addEventListener("click", pick);
    g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); } });
    picture.append(g);
  }
  box.replaceChildren(picture, el("p", { class: "muted", text: "Click a node (or focus it and press Enter) to see its effects." }));
}

function clipText(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }
