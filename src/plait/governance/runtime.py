"""``FlowRuntime``: where a governed node stands, as a value that journals byte-identically.

It holds the flow *state* (the context as the node started, updated by successful
object-valued tool results and answered asks), the *marking* (steps done, successful
calls per tool) and the last value of each reset guard (a reset fires on a rising edge,
so the previous value must survive a checkpoint). Only ``monitor.py`` makes new ones.

JSON shape (canonical JSON sorts the keys; ``resets`` is omitted when the flow has no
reset constraint)::

    {"state": {...}, "done": ["verify"], "calls": {"lookup_account": 1}, "resets": [false]}

``done`` is sorted; ``calls`` holds only counts of at least 1 (a reset removes a count).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from plait.core.canonical import dumps, loads

__all__ = ["FlowRuntime"]

_KEYS = ("state", "done", "calls", "resets")


@dataclass(frozen=True)
class FlowRuntime:
    """The flow state, the marking and the reset edges. Never mutated: every change is a
    new value, so an admission computed from an older runtime stays what it was."""

    state: Mapping[str, Any] = field(default_factory=dict)
    done: frozenset[str] = frozenset()
    calls: Mapping[str, int] = field(default_factory=dict)
    resets: tuple[bool, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A canonical-JSON-ready dict (fresh: the caller may keep or change it)."""
        out: dict[str, Any] = {
            "state": loads(dumps(dict(self.state))),
            "done": sorted(self.done),
            "calls": {tool: self.calls[tool] for tool in sorted(self.calls)},
        }
        if self.resets:
            out["resets"] = list(self.resets)
        return out

    @staticmethod
    def from_json(data: Any) -> FlowRuntime:
        """The runtime ``to_json`` wrote; raises ValueError on anything else."""
        if not isinstance(data, dict):
            raise ValueError("a flow runtime must be an object")
        unknown = sorted(str(k) for k in data if k not in _KEYS)
        if unknown or "state" not in data:
            raise ValueError(f"a flow runtime has state, done, calls, resets; got {sorted(data)}")
        state, done = data["state"], data.get("done", [])
        calls, resets = data.get("calls", {}), data.get("resets", [])
        if not isinstance(state, dict):
            raise ValueError("flow runtime 'state' must be an object")
        if not isinstance(done, list) or not all(isinstance(s, str) for s in done):
            raise ValueError("flow runtime 'done' must be a list of step ids")
        if not isinstance(calls, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in calls.values()
        ):
            raise ValueError("flow runtime 'calls' must map tools to counts of at least 1")
        if not isinstance(resets, list) or not all(isinstance(r, bool) for r in resets):
            raise ValueError("flow runtime 'resets' must be a list of booleans")
        return FlowRuntime(loads(dumps(state)), frozenset(done), dict(calls), tuple(resets))
