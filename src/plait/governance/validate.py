"""Load-time checks of a flow: every problem at once, one line each (PLAIT-E027).

Three passes, each a superset of the one before, each returning a list of Problems:
``validate`` (the flow is well-formed: ids unique, references known, ``after`` acyclic,
every non-terminal step can complete), ``compile`` (it can work: no unreachable step, no
unguarded commit tool, no never-until waiting on a step that does not exist, no ordering
cycle across ``after`` and ``before``), ``compile_with_tools`` (every tool it names
exists). ``unwritten_keys`` and ``self_approving_guards`` are different in kind: their
findings are *warnings* (a guard reading a key nothing declares it writes, or that only an
approval asked too late writes, may still be satisfied by the node's input), so ``check``
returns ``Findings(errors, warnings)`` and only errors make a flow invalid.
Every Problem carries code E027; severity is which list it is in.

Pure: never reads anything but its arguments; output order follows declaration order.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plait.core.errors import Problem
from plait.governance.guards import (
    Guard,
    is_trivially_false,
    is_trivially_true,
    keys_read,
    needs_keys,
    steps_named,
    tools_named,
)
from plait.governance.parts import Before, NeverUntil, Once, Require, Reset, Step

if TYPE_CHECKING:
    from plait.governance.flow import Flow

__all__ = [
    "Findings",
    "check",
    "compile",
    "compile_with_tools",
    "self_approving_guards",
    "state_keys_read",
    "tool_universe",
    "unwritten_keys",
    "validate",
]


def _problem(message: str) -> Problem:
    return Problem("E027", message)


def _hint(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _guards(flow: Flow) -> Iterator[tuple[str, Guard]]:
    """Every guard of the flow with a label saying where it sits, in declaration order."""
    for step in flow.steps:
        for e in step.after:
            if e.when is not None:
                yield f"step '{step.id}' edge from '{e.step}'", e.when
        if step.gate is not None:
            yield f"step '{step.id}' gate", step.gate
        if step.done is not None:
            yield f"step '{step.id}' done", step.done
    for c in flow.constraints:
        if isinstance(c, NeverUntil):
            yield f"never('{c.tool}').until", c.until
        elif isinstance(c, Reset):
            yield f"reset({_ids(c.steps)}).when", c.when


def _ids(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _cycle(nodes: Sequence[str], edges: dict[str, list[str]]) -> list[list[str]]:
    """The cycles of a directed graph, one per strongly connected part (declaration order),
    each as a path ``[a, b, ..., a]`` through the part."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)

    def connect(root: str) -> None:
        # Tarjan, with an explicit stack of (step, next successor): a chain of thousands
        # of steps must not exhaust Python's recursion limit.
        visit(root)
        walk = [(root, 0)]
        while walk:
            v, i = walk[-1]
            successors = edges.get(v, [])
            if i < len(successors):
                walk[-1] = (v, i + 1)
                w = successors[i]
                if w not in index:
                    visit(w)
                    walk.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            walk.pop()
            if walk:
                parent = walk[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                part: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    part.append(w)
                    if w == v:
                        break
                if len(part) > 1 or v in successors:
                    parts.append(part)

    for v in nodes:
        if v not in index:
            connect(v)
    order = {v: i for i, v in enumerate(nodes)}
    cycles = []
    for part in sorted(parts, key=lambda p: min(order[v] for v in p)):
        members = set(part)
        start = min(part, key=order.__getitem__)
        cycles.append(_path_back(start, members, edges))
    return cycles


def _path_back(start: str, members: set[str], edges: dict[str, list[str]]) -> list[str]:
    """A shortest path from ``start`` back to itself inside ``members`` (BFS, edge order)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for v in frontier:
            for w in edges.get(v, []):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if w in members and w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"no cycle through {start!r}")


def _successors(flow: Flow, known: set[str], with_before: bool) -> dict[str, list[str]]:
    edges: dict[str, list[str]] = {s.id: [] for s in flow.steps}
    for step in flow.steps:
        for e in step.after:
            if e.step in known and step.id not in edges[e.step]:
                edges[e.step].append(step.id)
    pairs = [(c.first, c.then) for c in flow.constraints if isinstance(c, Before)]
    for first, then in pairs if with_before else []:
        if first in known and then in known and then not in edges[first]:
            edges[first].append(then)
    return edges


def _arrow(path: Sequence[str]) -> str:
    return " -> ".join(path)


def validate(flow: Flow) -> list[Problem]:
    """Well-formedness: every problem at once (an empty list means valid)."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, step in enumerate(flow.steps):
        if not step.id.strip():
            problems.append(_problem(f"steps[{i}] has an empty id"))
        elif step.id in seen:
            problems.append(
                _problem(f"duplicate step id '{step.id}' (steps[{seen[step.id]}] and steps[{i}])")
            )
        else:
            seen[step.id] = i
    known = set(seen)

    def unknown(step: str, where: str) -> None:
        """``where`` says what refers to the step: "step 'b' comes after", "... reads"."""
        if step not in known:
            problems.append(_problem(f"{where} unknown step '{step}'{_hint(step, known)}"))

    for step in flow.steps:
        for e in step.after:
            unknown(e.step, f"step '{step.id}' comes after")
        if not step.terminal and step.done is None:
            problems.append(
                _problem(
                    f"step '{step.id}' has no 'done' guard and is not terminal, "
                    "so it can never complete"
                )
            )
    for where, guard in _guards(flow):
        if not where.startswith("never("):  # compile judges never-until guards
            for name in steps_named(guard):
                unknown(name, f"{where} reads")
    for c in flow.constraints:
        if isinstance(c, Before):
            for name in (c.first, c.then):
                unknown(name, f"before('{c.first}', '{c.then}') names")
        elif isinstance(c, Require | Reset):
            verb = "require" if isinstance(c, Require) else "reset"
            for name in c.steps:
                unknown(name, f"{verb}({_ids(c.steps)}) names")
    ids = [s.id for s in flow.steps if seen.get(s.id) is not None]
    for path in _cycle(list(dict.fromkeys(ids)), _successors(flow, known, with_before=False)):
        problems.append(
            _problem(f"'after' edges form a cycle: {_arrow(path)} (no step on it can start)")
        )
    return problems


def compile(flow: Flow) -> list[Problem]:
    """``validate`` plus whether the flow can work as written."""
    problems = validate(flow)
    known = {s.id for s in flow.steps}
    ids = list(dict.fromkeys(s.id for s in flow.steps))
    after_cycles = _cycle(ids, _successors(flow, known, with_before=False))
    all_cycles = _cycle(ids, _successors(flow, known, with_before=True))
    on_cycle = {v for path in all_cycles for v in path}
    problems += _unreachable(flow, known, on_cycle)
    after_parts = [set(p) for p in after_cycles]
    for path in all_cycles:
        if set(path) not in after_parts:
            problems.append(
                _problem(
                    f"ordering cycle across 'after' and 'before': {_arrow(path)} "
                    "(no step on it can start)"
                )
            )
    for tool in flow.confirm_tools:
        guards = [c.until for c in flow.constraints if isinstance(c, NeverUntil) and c.tool == tool]
        if not guards:
            problems.append(
                _problem(f"commit tool '{tool}' has no never('{tool}').until(...) guard")
            )
        elif all(is_trivially_true(g) for g in guards):
            problems.append(
                _problem(
                    f"commit tool '{tool}' is guarded by a guard that always holds, "
                    "so nothing holds it back"
                )
            )
    for c in flow.constraints:
        if isinstance(c, NeverUntil):
            for name in steps_named(c.until):
                if name not in known:
                    problems.append(
                        _problem(
                            f"never('{c.tool}').until reads unknown step '{name}'"
                            f"{_hint(name, known)}, so '{c.tool}' would be refused forever"
                        )
                    )
    return problems


def _unreachable(flow: Flow, known: set[str], on_cycle: set[str]) -> list[Problem]:
    """Steps that can never become eligible, for a reason other than sitting on a cycle
    (cycles are reported as such). Unknown references are ``validate``'s to report."""
    terminal = {s.id for s in flow.steps if s.terminal}
    firsts: dict[str, list[str]] = {}
    for c in flow.constraints:
        if isinstance(c, Before) and c.first in known:
            firsts.setdefault(c.then, []).append(c.first)
    reachable: set[str] = set()

    def why_not(step: Step) -> str | None:
        """Why ``step`` cannot become eligible given ``reachable``; None when it can."""
        if step.gate is not None and is_trivially_false(step.gate):
            return "its gate can never hold"
        edges = [e for e in step.after if e.step in known]
        live = [
            e
            for e in edges
            if e.step in reachable
            and e.step not in terminal
            and not (e.when is not None and is_trivially_false(e.when))
        ]
        dead = [e for e in edges if e not in live]
        if edges and (not live if step.join == "any" else dead):
            return _dead_edge(dead[0].step, dead[0].when, terminal, on_cycle)
        for first in firsts.get(step.id, []):
            if first not in reachable:
                return f"it must wait for '{first}' (before), which {_never(first, on_cycle)}"
        return None

    changed = True
    while changed:
        changed = False
        for step in flow.steps:
            if step.id not in reachable and why_not(step) is None:
                reachable.add(step.id)
                changed = True
    blocked: dict[str, str] = {}  # by id, so duplicate ids report once
    for step in flow.steps:
        if step.id not in reachable and step.id not in on_cycle:
            blocked.setdefault(step.id, why_not(step) or "it can never become eligible")
    return [_problem(f"step '{sid}' is unreachable: {why}") for sid, why in blocked.items()]


def _never(step: str, on_cycle: set[str]) -> str:
    return "is on a cycle" if step in on_cycle else "is itself unreachable"


def _dead_edge(source: str, when: Guard | None, terminal: set[str], on_cycle: set[str]) -> str:
    if source in terminal:
        return f"it comes after terminal step '{source}', and a terminal step ends the flow"
    if when is not None and is_trivially_false(when):
        return f"its edge from '{source}' has a guard that can never hold"
    return f"it comes after '{source}', which {_never(source, on_cycle)}"


def tool_universe(flow: Flow) -> list[tuple[str, str]]:
    """Every tool the flow names, with where: ``(tool, place)`` in declaration order."""
    named: list[tuple[str, str]] = []
    for step in flow.steps:
        named += [(t, f"step '{step.id}' allow") for t in step.allow or ()]
        named += [(t, f"step '{step.id}' deny") for t in step.deny]
    for where, guard in _guards(flow):
        named += [(t, f"{where} called_ok") for t in tools_named(guard)]
    for c in flow.constraints:
        if isinstance(c, Once):
            named.append((c.tool, "once"))
        elif isinstance(c, NeverUntil):
            named.append((c.tool, "never"))
    named += [(t, "confirm_tools") for t in flow.confirm_tools]
    named += [(t, "ambient") for t in flow.ambient]
    return named


def compile_with_tools(flow: Flow, tools: Iterable[str]) -> list[Problem]:
    """``compile`` plus every tool name the flow uses that ``tools`` does not define."""
    problems = compile(flow)
    registry = set(tools)
    reported: set[tuple[str, str]] = set()
    for tool, where in tool_universe(flow):
        if tool not in registry and (tool, where) not in reported:
            reported.add((tool, where))
            problems.append(_problem(f"{where} names unknown tool '{tool}'{_hint(tool, registry)}"))
    return problems


def state_keys_read(flow: Flow) -> list[str]:
    """Every flow-state key any guard reads (gates, done, edges, never-until, reset), sorted."""
    return sorted({key for _, guard in _guards(flow) for key in keys_read(guard)})


def unwritten_keys(flow: Flow, declared_writes: Iterable[str]) -> list[Problem]:
    """Warnings: keys a guard reads that no node, tool or ask declares it writes.

    Such a key can only come from the node's input; if it never does, the guard never
    holds. One warning per key, at its first reader, with a did-you-mean.
    """
    written = set(declared_writes)
    warned: set[str] = set()
    found: list[Problem] = []
    for where, guard in _guards(flow):
        for key in keys_read(guard):
            if key not in written and key not in warned:
                warned.add(key)
                found.append(
                    _problem(
                        f"{where} reads key '{key}', which no node, tool or ask declares "
                        f"it writes{_hint(key, written)}"
                    )
                )
    return found


def self_approving_guards(flow: Flow, approvals: Mapping[str, Iterable[str]]) -> list[Problem]:
    """Warnings: a never-until (or commit) guard of an approval-required tool that cannot
    hold without a key only that tool's own approval answer writes.

    ``approvals`` maps each approval-required tool to those keys (``approved``, ``by``,
    ``reason`` less whatever else writes them). Its approval is asked only once a call
    was admitted, and the guard refuses every call until the answer exists: in enforce
    mode the tool never runs, unless the node's input already carries the key.
    """
    if flow.mode == "observe":
        return []
    found: list[Problem] = []
    for c in flow.constraints:
        if not isinstance(c, NeverUntil) or c.tool not in approvals:
            continue
        own = set(approvals[c.tool])
        read = [k for k in keys_read(c.until) if k in own]
        if read and needs_keys(c.until, own):
            found.append(
                _problem(
                    f"never('{c.tool}').until reads {_ids(read)}, which only the approval of"
                    f" '{c.tool}' itself writes, and that approval is asked only after the"
                    " guard admitted a call: it never holds (unless the node's input sets it)"
                )
            )
    return found


@dataclass(frozen=True)
class Findings:
    """What ``check`` found: errors make the flow invalid, warnings only inform."""

    errors: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()


def check(
    flow: Flow,
    tools: Iterable[str] | None = None,
    writes: Iterable[str] | None = None,
    approvals: Mapping[str, Iterable[str]] | None = None,
) -> Findings:
    """Every pass at once (what ``plait check`` runs): the strictest compile the arguments
    allow, plus the unwritten-key warnings when ``writes`` is given and the self-approving
    guard warnings when ``approvals`` is (see ``self_approving_guards``)."""
    errors = compile(flow) if tools is None else compile_with_tools(flow, tools)
    warnings = [] if writes is None else unwritten_keys(flow, writes)
    if approvals is not None:
        warnings += self_approving_guards(flow, approvals)
    return Findings(tuple(errors), tuple(warnings))
