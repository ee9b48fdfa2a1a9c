"""The support example of examples/support as a builder-made workflow, for in-process tests.

The example's tools are imported from their file under a name of their own (so no other
``tools`` module is ever picked up), its flow file is copied next to the run's SQLite
file (with ``mode: observe`` appended when asked), and the node names that copy by path.
Every tool appends its name to ``$SUPPORT_EXECUTIONS`` when it really runs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from plait import Runtime, Workflow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support"
NOW_MS = 1_767_225_600_000
TOOLS = [
    "lookup_account",
    "disclose_policy",
    "offer_refund",
    "confirm_with_customer",
    "issue_refund",
]
WRITES = {
    "lookup_account": ["account_id", "identity_verified"],
    "disclose_policy": ["policy_disclosed"],
    "offer_refund": ["offered_cents"],
    "confirm_with_customer": ["customer_confirmed"],
    "issue_refund": ["refund_id"],
}


def example_tools() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plait_support_desk_tools", EXAMPLE / "tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Desk:
    """The example in ``folder``: a SQLite store, a copy of the flow, an execution log."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.db = f"sqlite:///{folder / 'plait.db'}"
        self.executions = folder / "executions.log"
        monkeypatch.setenv("SUPPORT_EXECUTIONS", str(self.executions))
        self.tools = example_tools()

    def workflow(
        self, answers: str = "answers_misbehaving.json", *, mode: str = "enforce", tokens: int = 0
    ) -> Workflow:
        """The example's workflow; ``tokens``: a token ceiling (each turn reserves 100)."""
        flow = self.folder / "support.yaml"
        text = (EXAMPLE / "flows" / "support.yaml").read_text()
        flow.write_text(text + ("mode: observe\n" if mode == "observe" else ""))
        wf = Workflow.new("support-desk")
        for name in TOOLS:
            wf = wf.tool(getattr(self.tools, name), writes=WRITES[name])
        wf = wf.node(
            "agent",
            instruction="Help the customer with their refund request.",
            tools=TOOLS,
            flow=str(flow),
        ).model(f"scripted:{EXAMPLE / answers}", max_tokens=100)
        return wf.budget(max_tokens=tokens) if tokens else wf

    def runtime(self) -> Runtime:
        return Runtime(self.db, clock=lambda: NOW_MS, principal="alice")

    def executed(self) -> list[str]:
        return self.executions.read_text().split() if self.executions.exists() else []


def kinds(entries: list[dict[str, Any]]) -> list[str]:
    return [e["kind"] for e in entries]


def notes(entries: list[dict[str, Any]], kind: str) -> list[tuple[int, Any, Any]]:
    """``(turn effect_seq, tool, reason)`` of every ``refused`` entry, or ``(turn
    effect_seq, tool, rule)`` of every violation listed on a turn's entry."""
    found = []
    for e in entries:
        if kind == "violation":
            found += [(e["effect_seq"], v["tool"], v["rule"]) for v in e.get("violations", ())]
        elif e["kind"] == kind:
            found.append((e["effect_seq"], e["input"]["tool"], e["result"]["reason"]))
    return found


def violations_on_their_turns(entries: list[dict[str, Any]]) -> bool:
    """Every violation sits on the llm entry of the turn that made its call."""
    for e in entries:
        for v in e.get("violations", ()):
            if e["kind"] != "llm":
                return False
            ids = [c["id"] for c in e["result"].get("tool_calls") or ()]
            if v["tool_call_id"] is not None and v["tool_call_id"] not in ids:
                return False
    return True


def follows_its_turn(entries: list[dict[str, Any]], kind: str) -> bool:
    """Each ``kind`` entry comes right after the turn that made its call (or a sibling)."""
    for i, e in enumerate(entries):
        if e["kind"] != kind:
            continue
        j = i - 1
        while entries[j]["kind"] == "refused":
            j -= 1
        turn = entries[j]
        if turn["kind"] != "llm" or turn["effect_seq"] != e["effect_seq"]:
            return False
        ids = [c["id"] for c in turn["result"].get("tool_calls") or ()]
        if e["result"]["tool_call_id"] is not None and e["result"]["tool_call_id"] not in ids:
            return False
    return True
