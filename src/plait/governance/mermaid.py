"""``to_mermaid``: a flow as a Mermaid flowchart, so the spec can be read as a picture.

Steps are boxes (terminal steps rounded), ``after`` edges are arrows labelled with their
guard, ``before`` constraints are dotted arrows, and every other constraint sits in one
note box. Node names are positional (``s0``, ``s1``...) so that any step id is safe; the
id is the label. Output is deterministic: declaration order throughout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plait.governance.guards import Guard, describe
from plait.governance.parts import Before, NeverUntil, Once, Require, Reset

if TYPE_CHECKING:
    from plait.governance.flow import Flow

__all__ = ["to_mermaid"]


def _text(value: str) -> str:
    """Label text safe inside a double-quoted Mermaid label."""
    for raw, entity in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        value = value.replace(raw, entity)
    return value.replace("`", "'")


def _prose(guard: Guard) -> str:
    return _text(describe(guard))


def to_mermaid(flow: Flow) -> str:
    """The flow as Mermaid ``flowchart TD`` text (ends with a newline)."""
    node: dict[str, str] = {}
    for i, step in enumerate(flow.steps):
        node.setdefault(step.id, f"s{i}")
    lines = ["flowchart TD"]
    for i, step in enumerate(flow.steps):
        label = [_text(step.id)]
        if step.join == "any":
            label.append("after any")
        if step.gate is not None:
            label.append(f"gate: {_prose(step.gate)}")
        text = "<br/>".join(label)
        shape = f'(["{text}"])' if step.terminal else f'["{text}"]'
        lines.append(f"    s{i}{shape}")
    for i, step in enumerate(flow.steps):
        for e in step.after:
            source = node.get(e.step)
            if source is None:
                continue
            arrow = "-->" if e.when is None else f'-->|"{_prose(e.when)}"|'
            lines.append(f"    {source} {arrow} s{i}")
    notes: list[str] = []
    for c in flow.constraints:
        match c:
            case Before(first, then) if first in node and then in node:
                lines.append(f"    {node[first]} -. before .-> {node[then]}")
            case Before(first, then):
                notes.append(f"before: {_text(first)}, {_text(then)}")
            case Once(tool):
                notes.append(f"once: {_text(tool)}")
            case NeverUntil(tool, until):
                notes.append(f"never: {_text(tool)} until {_prose(until)}")
            case Require(steps):
                notes.append(f"require: {_text(', '.join(steps))}")
            case Reset(steps, when):
                notes.append(f"reset: {_text(', '.join(steps))} when {_prose(when)}")
    if flow.confirm_tools:
        notes.append(f"commit: {_text(', '.join(flow.confirm_tools))}")
    if flow.ambient:
        notes.append(f"ambient: {_text(', '.join(flow.ambient))}")
    if flow.mode != "enforce":
        notes.append(f"mode: {flow.mode}")
    if notes:
        lines.append(f'    constraints["{"<br/>".join(notes)}"]')
        lines.append("    classDef note fill:#fff8c4,stroke:#c9b458")
        lines.append("    class constraints note")
    return "\n".join(lines) + "\n"
