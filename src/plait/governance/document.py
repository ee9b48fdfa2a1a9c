"""The dict form of a flow (CONTRACT.md "Governance flow files"): what YAML and JSON hold.

``flow_from_dict`` checks the *shape* only (keys, types) and reports every shape problem
at once as one PlaitError (PLAIT-E027), each problem naming its step, constraint or guard;
whether the steps make sense together is ``validate.py``'s job. ``commit:`` entries are
expanded into what they mean (``once`` + ``never``/``until`` in ``constraints`` and the
tool in ``confirm_tools``). Writing is ``writer.py`` (``flow_to_dict``, re-exported
here), so ``flow_from_dict(flow_to_dict(f)) == f`` for every flow, and a document read
and written once is a fixpoint of reading and writing.

Messages name places flow-locally (``step 'offer' gate: ...``); the caller adds the node.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, Final

from plait.core.canonical import CanonicalJSONError, dumps, loads
from plait.core.errors import PlaitError, Problem
from plait.governance.flow import Flow
from plait.governance.guards import (
    AllOf,
    Always,
    AnyOf,
    CalledOk,
    Captured,
    Done,
    Eq,
    Guard,
    IsSet,
    IsTrue,
    Not,
)
from plait.governance.parts import (
    After,
    Before,
    Constraint,
    NeverUntil,
    Once,
    Require,
    Reset,
    Step,
    with_commit,
)
from plait.governance.writer import flow_to_dict, guard_to_dict

__all__ = ["flow_from_dict", "flow_to_dict", "guard_from_dict", "guard_to_dict"]

FLOW_KEYS: Final = ("mode", "steps", "constraints", "commit", "confirm_tools", "ambient")
STEP_KEYS: Final = (
    "id", "after", "join", "gate", "done", "allow", "deny", "posture", "terminal",
)  # fmt: skip
CONSTRAINT_KINDS: Final = ("once", "never", "before", "require", "reset")
CONSTRAINT_KEYS: Final = {
    "once": ("once",),
    "never": ("never", "until"),
    "before": ("before",),
    "require": ("require",),
    "reset": ("reset", "when"),
}
GUARD_NAMES: Final = (
    "always", "is_true", "is_set", "eq", "captured", "called_ok", "done", "all", "any", "not",
)  # fmt: skip
MODES: Final = ("enforce", "observe")
JOINS: Final = ("all", "any")
MAX_GUARD_DEPTH: Final = 32


def _hint(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return names.get(type(value), type(value).__name__)


class _Reader:
    """Reads a flow document, collecting every shape problem instead of stopping.

    A reader that meets a bad value notes the problem and returns a stand-in (an empty
    name, ``always``), so that reading goes on and finds the next problem; a document with
    any problem is refused as a whole, so no stand-in ever reaches a Flow.
    """

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem("E027", f"{where}: {message}"))

    def mapping(self, value: Any, where: str, allowed: Sequence[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.add(where, f"must be a mapping, not {_kind(value)}")
            return {}
        for key in value:
            if key not in allowed:
                label = key if isinstance(key, str) else repr(key)
                self.add(where, f"unknown key '{label}'{_hint(str(key), allowed)}")
        return value

    def need(self, doc: dict[str, Any], key: str, where: str) -> bool:
        if key not in doc:
            self.add(where, f"has no '{key}'")
        return key in doc

    def name(self, value: Any, where: str, what: str = "a name") -> str:
        if isinstance(value, str) and value.strip():
            return value
        found = "an empty string" if isinstance(value, str) else _kind(value)
        self.add(where, f"must be {what} (a non-empty string), not {found}")
        return ""

    def names(self, value: Any, where: str, what: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.add(where, f"must be a list of {what}, not {_kind(value)}")
            return ()
        return tuple(self.name(v, f"{where}[{i}]") for i, v in enumerate(value))

    def items(self, value: Any, where: str, what: str) -> list[Any]:
        if not isinstance(value, list):
            self.add(where, f"must be a list of {what}, not {_kind(value)}")
            return []
        return value

    def choice(self, value: Any, where: str, choices: tuple[str, ...]) -> str:
        if isinstance(value, str) and value in choices:
            return value
        shown = " or ".join(f"'{c}'" for c in choices)
        hint = _hint(value, choices) if isinstance(value, str) else ""
        self.add(where, f"must be {shown}, not {dumps_safe(value)}{hint}")
        return choices[0]

    # --- the flow -------------------------------------------------------------------------

    def flow(self, data: Any) -> Flow:
        doc = self.mapping(data, "flow", FLOW_KEYS)
        mode = self.choice(doc["mode"], "flow mode", MODES) if "mode" in doc else "enforce"
        raw_steps = self.items(doc["steps"], "flow steps", "steps") if "steps" in doc else []
        if isinstance(data, dict) and "steps" not in doc:
            self.add("flow", "has no 'steps' (a list of steps)")
        steps = [self.step(s, i) for i, s in enumerate(raw_steps)]
        raw = self.items(doc.get("constraints", []), "flow constraints", "constraints")
        constraints = [self.constraint(c, i) for i, c in enumerate(raw)]
        confirm = self.names(doc.get("confirm_tools", []), "flow confirm_tools", "tool names")
        for i, entry in enumerate(self.items(doc.get("commit", []), "flow commit", "commits")):
            commit = self.commit(entry, i)
            constraints = list(with_commit(tuple(constraints), commit.tool, commit.until))
            confirm = (*confirm, commit.tool)
        ambient = self.names(doc.get("ambient", []), "flow ambient", "tool names")
        return Flow(
            steps=tuple(steps),
            constraints=tuple(constraints),
            confirm_tools=tuple(dict.fromkeys(confirm)),
            ambient=tuple(dict.fromkeys(ambient)),
            mode="observe" if mode == "observe" else "enforce",
        )

    def step(self, data: Any, index: int) -> Step:
        where = f"steps[{index}]"
        if isinstance(data, dict) and isinstance(data.get("id"), str) and data["id"].strip():
            where = f"step '{data['id']}'"
        doc = self.mapping(data, where, STEP_KEYS)
        step_id = (
            self.name(doc["id"], f"{where} id", "a step id") if self.need(doc, "id", where) else ""
        )
        edges = self.items(doc.get("after", []), f"{where} after", "edges")
        join = self.choice(doc.get("join", "all"), f"{where} join", JOINS)
        gate, done, allow = doc.get("gate"), doc.get("done"), doc.get("allow")
        posture = doc.get("posture")
        return Step(
            id=step_id,
            after=tuple(self.edge(e, f"{where} after[{i}]") for i, e in enumerate(edges)),
            join="any" if join == "any" else "all",
            gate=None if gate is None else self.guard(gate, f"{where} gate"),
            done=None if done is None else self.guard(done, f"{where} done"),
            allow=None if allow is None else self.names(allow, f"{where} allow", "tool names"),
            deny=self.names(doc.get("deny", []), f"{where} deny", "tool names"),
            posture=None if posture is None else self.text(posture, f"{where} posture"),
            terminal=self.flag(doc.get("terminal", False), f"{where} terminal"),
        )

    def text(self, value: Any, where: str) -> str:
        if isinstance(value, str):
            return value
        self.add(where, f"must be a string, not {_kind(value)}")
        return ""

    def flag(self, value: Any, where: str) -> bool:
        if isinstance(value, bool):
            return value
        self.add(where, f"must be true or false, not {_kind(value)}")
        return False

    def edge(self, value: Any, where: str) -> After:
        if isinstance(value, str):
            return After(self.name(value, where, "a step id"))
        if not isinstance(value, dict):
            self.add(where, f"must be a step id or {{step, when}}, not {_kind(value)}")
            return After("")
        doc = self.mapping(value, where, ("step", "when"))
        step = (
            self.name(doc["step"], f"{where} step", "a step id")
            if self.need(doc, "step", where)
            else ""
        )
        when = self.guard(doc["when"], f"{where} when") if "when" in doc else None
        return After(step, when)

    # --- constraints ----------------------------------------------------------------------

    def constraint(self, data: Any, index: int) -> Constraint:
        where = f"constraints[{index}]"
        kinds = [k for k in CONSTRAINT_KINDS if k in data] if isinstance(data, dict) else []
        if not isinstance(data, dict):
            self.add(where, f"must be a mapping such as {{once: tool}}, not {_kind(data)}")
            return Require(())
        if len(kinds) != 1:
            listed = ", ".join(CONSTRAINT_KINDS)
            if kinds:
                self.add(where, f"sets {' and '.join(kinds)}; a constraint is one of {listed}")
            else:
                hints = "".join(_hint(str(k), CONSTRAINT_KINDS) for k in data)
                self.add(where, f"is none of {listed}{hints}")
            return Require(())
        kind = kinds[0]
        where = f"{where} ({kind})"
        doc = self.mapping(data, where, CONSTRAINT_KEYS[kind])
        value = doc[kind]
        if kind == "once":
            return Once(self.name(value, where, "a tool name"))
        if kind == "never":
            tool = self.name(value, where, "a tool name")
            return NeverUntil(tool, self.partner(doc, "until", where))
        steps = self.names(value, where, "two step ids" if kind == "before" else "step ids")
        if kind == "before" and isinstance(value, list) and len(value) != 2:
            self.add(where, f"must name exactly two steps, not {len(value)}")
        if kind == "before":
            return Before(*steps) if len(steps) == 2 else Require(())
        if kind == "require":
            return Require(steps)
        return Reset(steps, self.partner(doc, "when", where))

    def partner(self, doc: dict[str, Any], key: str, where: str) -> Guard:
        """The guard a never (``until``) or reset (``when``) constraint needs."""
        return self.guard(doc[key], f"{where} {key}") if self.need(doc, key, where) else Always()

    def commit(self, data: Any, index: int) -> NeverUntil:
        where = f"commit[{index}]"
        doc = self.mapping(data, where, ("tool", "until"))
        tool = (
            self.name(doc["tool"], f"{where} tool", "a tool name")
            if self.need(doc, "tool", where)
            else ""
        )
        until = (
            self.guard(doc["until"], f"{where} until")
            if self.need(doc, "until", where)
            else Always()
        )
        return NeverUntil(tool, until)

    # --- guards ---------------------------------------------------------------------------

    def guard(self, data: Any, where: str, depth: int = 0, root: str = "") -> Guard:
        root = root or where
        if depth > MAX_GUARD_DEPTH:
            self.add(root, f"guards nest deeper than {MAX_GUARD_DEPTH} levels")
            return Always()
        if isinstance(data, str):
            if data == "always":
                return Always()
            if data in GUARD_NAMES:
                self.add(where, f"guard '{data}' needs a value, as in {{{data}: ...}}")
            else:
                self.add(where, f"unknown guard '{data}'{_hint(data, GUARD_NAMES)}")
            return Always()
        if not isinstance(data, dict) or len(data) != 1:
            shape = "a mapping with several keys" if isinstance(data, dict) else _kind(data)
            self.add(where, f"a guard is 'always' or a mapping with one key, not {shape}")
            return Always()
        ((name, value),) = data.items()
        at = f"{where} {name}"
        if name not in GUARD_NAMES or name == "always":
            label = name if isinstance(name, str) else repr(name)
            hint = (
                " (write it as a plain string)"
                if name == "always"
                else _hint(str(name), GUARD_NAMES)
            )
            self.add(where, f"unknown guard '{label}'{hint}")
            return Always()
        if name == "is_true":
            return IsTrue(self.name(value, at, "a state key"))
        if name == "is_set":
            return IsSet(self.name(value, at, "a state key"))
        if name == "called_ok":
            return CalledOk(self.name(value, at, "a tool name"))
        if name == "done":
            return Done(self.name(value, at, "a step id"))
        if name == "captured":
            keys = self.names(value, at, "state keys")
            if isinstance(value, list) and not value:
                self.add(at, "must name at least one key")
            return Captured(keys)
        if name == "eq":
            return self.eq(value, at)
        if name == "not":
            return Not(self.guard(value, at, depth + 1, root))
        found = self.items(value, at, "guards")
        guards = tuple(self.guard(g, f"{at}[{i}]", depth + 1, root) for i, g in enumerate(found))
        return AllOf(guards) if name == "all" else AnyOf(guards)

    def eq(self, value: Any, where: str) -> Eq:
        if not isinstance(value, list) or len(value) != 2:
            self.add(where, f"must be a pair [key, value], not {dumps_safe(value)}")
            return Eq("", None)
        key = self.name(value[0], f"{where}[0]", "a state key")
        try:
            return Eq(key, loads(dumps(value[1])))
        except CanonicalJSONError:
            self.add(f"{where}[1]", "must be a JSON value (no NaN or Infinity)")
            return Eq(key, None)


def dumps_safe(value: Any) -> str:
    """A short rendering of a user's value for a message."""
    try:
        text = dumps(value)
    except CanonicalJSONError:
        text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def flow_from_dict(data: Any) -> Flow:
    """The flow a document describes; raises PlaitError (PLAIT-E027) with every shape problem."""
    reader = _Reader()
    flow = reader.flow(data)
    if reader.problems:
        raise PlaitError.from_problems(reader.problems)
    return flow


def guard_from_dict(data: Any, where: str = "guard") -> Guard:
    """One guard from its dict form; raises PlaitError (PLAIT-E027)."""
    reader = _Reader()
    guard = reader.guard(data, where)
    if reader.problems:
        raise PlaitError.from_problems(reader.problems)
    return guard
