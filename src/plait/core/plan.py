"""The plan: a validated, indexed workflow graph (docs/architecture.md §3.5, §13).

``build_plan`` checks everything that can be checked without IO and reports
every problem at once, each naming its node or edge: unique, well-formed ids,
known edge endpoints, parseable conditions, known reducers, reachability from
the entry, and that every cycle is bounded by a ``max_cycles`` edge (Tarjan's
SCC over the graph without its bounded edges). It also computes the back-edges
of an entry-rooted DFS, which do not gate readiness at generation 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from plait.core.conditions import Condition, ConditionError, parse_condition
from plait.core.errors import PlaitError, Problem
from plait.core.reducers import REDUCERS
from plait.core.text import has_control_character

NODE_KINDS: tuple[str, ...] = ("tool", "abstract", "ask", "subgraph", "timer")
MAX_ID_BYTES = 256


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node as the definition gives it."""

    id: str
    kind: str = "tool"
    retries: int = 0


@dataclass(frozen=True, slots=True)
class EdgeSpec:
    """An edge as the definition gives it (endpoints by node id)."""

    src: str
    dst: str
    when: str | None = None
    max_cycles: int | None = None


@dataclass(frozen=True, slots=True)
class PlanEdge:
    index: int
    src: int
    dst: int
    when: str | None
    condition: Condition | None
    max_cycles: int | None

    def label(self, plan: Plan) -> str:
        return f"{plan.nodes[self.src].id} -> {plan.nodes[self.dst].id}"


@dataclass(frozen=True)
class Plan:
    """Nodes in declaration order (the first is the entry) and edges in declaration order."""

    nodes: tuple[NodeSpec, ...]
    edges: tuple[PlanEdge, ...]
    reducers: Mapping[str, str]
    index: Mapping[str, int]
    out_edges: tuple[tuple[int, ...], ...]
    in_edges: tuple[tuple[int, ...], ...]
    back_edges: frozenset[int]
    gating_gen0: tuple[tuple[int, ...], ...] = field(default=())

    def is_terminal(self, node: int) -> bool:
        """A node without out-edges: reaching it DoneOk completes the run."""
        return not self.out_edges[node]


def _edge_label(spec: EdgeSpec) -> str:
    return f"{spec.src} -> {spec.dst}"


def _check_id(node_id: object, position: int) -> str | None:
    if not isinstance(node_id, str) or not node_id.strip():
        return f"node #{position + 1}: id must be a non-blank string"
    if len(node_id.encode("utf-8")) > MAX_ID_BYTES:
        return f"node '{node_id[:40]}…': id is longer than {MAX_ID_BYTES} bytes"
    if has_control_character(node_id):
        return f"node {node_id!r}: id contains a control character"
    return None


def _dfs_back_edges(n: int, out_edges: Sequence[Sequence[int]], dst_of: Sequence[int]) -> set[int]:
    """Edges into a node on the current DFS stack, walking from the entry in declaration order."""
    back: set[int] = set()
    if n == 0:
        return back
    color = [0] * n  # 0 white, 1 on stack, 2 done
    stack: list[tuple[int, int]] = [(0, 0)]
    color[0] = 1
    while stack:
        node, pos = stack[-1]
        edges = out_edges[node]
        if pos == len(edges):
            color[node] = 2
            stack.pop()
            continue
        stack[-1] = (node, pos + 1)
        e = edges[pos]
        dst = dst_of[e]
        if color[dst] == 1:
            back.add(e)
        elif color[dst] == 0:
            color[dst] = 1
            stack.append((dst, 0))
    return back


def _unbounded_cycles(
    n: int, succ: Sequence[Sequence[int]], self_loops: set[int]
) -> list[list[int]]:
    """Iterative Tarjan SCC; returns the cyclic components (size > 1 or a self-loop), sorted."""
    index_of = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    counter = 0
    cyclic: list[list[int]] = []
    for root in range(n):
        if index_of[root] != -1:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        index_of[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, pos = work[-1]
            if pos < len(succ[v]):
                work[-1] = (v, pos + 1)
                w = succ[v][pos]
                if index_of[w] == -1:
                    index_of[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index_of[w])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index_of[v]:
                component: list[int] = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1 or v in self_loops:
                    cyclic.append(sorted(component))
    return sorted(cyclic)


def build_plan(
    nodes: Sequence[NodeSpec],
    edges: Sequence[EdgeSpec],
    reducers: Mapping[str, str] | None = None,
    *,
    detached: frozenset[str] = frozenset(),
) -> Plan:
    """Validate and index a graph; raises PlaitError carrying every problem found.

    ``detached``: nodes that run only as child runs (agents and handoff targets, named by
    another node): one of them without in-edges needs no path from the entry."""
    problems: list[Problem] = []
    reducers = dict(reducers or {})
    if not nodes:
        raise PlaitError("E019", "the workflow has no nodes (the first node is the entry)")

    index: dict[str, int] = {}
    for pos, node in enumerate(nodes):
        bad = _check_id(node.id, pos)
        if bad:
            problems.append(
                Problem("E019", bad, node=node.id if isinstance(node.id, str) else None)
            )
            continue
        if node.id in index:
            problems.append(Problem("E019", f"node '{node.id}': duplicate node id", node=node.id))
            continue
        index[node.id] = pos
        if node.kind not in NODE_KINDS:
            problems.append(
                Problem("E019", f"node '{node.id}': unknown kind {node.kind!r}", node=node.id)
            )
        if isinstance(node.retries, bool) or not isinstance(node.retries, int) or node.retries < 0:
            problems.append(
                Problem("E019", f"node '{node.id}': retries must be an integer >= 0", node=node.id)
            )

    plan_edges: list[PlanEdge] = []
    for e, spec in enumerate(edges):
        label = _edge_label(spec)
        known = True
        for end, name in (("from", spec.src), ("to", spec.dst)):
            if name not in index:
                problems.append(
                    Problem("E019", f"edge '{label}': unknown node '{name}' in '{end}'", edge=e)
                )
                known = False
        condition: Condition | None = None
        if spec.when is not None:
            if not isinstance(spec.when, str):
                problems.append(
                    Problem("E005", f"edge '{label}': condition must be a string", edge=e)
                )
            else:
                try:
                    condition = parse_condition(spec.when)
                except ConditionError as exc:
                    problems.append(
                        Problem(
                            "E005",
                            f"edge '{label}': invalid condition {spec.when!r}: {exc.message}",
                            edge=e,
                        )
                    )
        mc = spec.max_cycles
        if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or mc < 1):
            problems.append(
                Problem("E019", f"edge '{label}': max_cycles must be an integer >= 1", edge=e)
            )
            mc = None
        if known:
            plan_edges.append(
                PlanEdge(e, index[spec.src], index[spec.dst], spec.when, condition, mc)
            )

    for key, name in sorted(reducers.items()):
        if name not in REDUCERS:
            problems.append(
                Problem(
                    "E019",
                    f"reducer for key '{key}': unknown reducer {name!r}"
                    f" (known: {', '.join(REDUCERS)})",
                )
            )

    # The graph checks below need every node and edge end known; when some are not, they
    # would only report consequences of those problems (a node "unreachable" through a
    # misspelled edge), so the problems found so far are reported alone.
    if len(index) < len(nodes) or len(plan_edges) < len(edges):
        raise PlaitError.from_problems(problems)

    n = len(nodes)
    out_edges: list[list[int]] = [[] for _ in range(n)]
    in_edges: list[list[int]] = [[] for _ in range(n)]
    for pe in plan_edges:
        out_edges[pe.src].append(pe.index)
        in_edges[pe.dst].append(pe.index)
    dst_of = {pe.index: pe.dst for pe in plan_edges}
    dense_dst = [dst_of.get(i, 0) for i in range(len(edges))]

    # Reachability from the entry.
    seen = [False] * n
    seen[0] = True
    frontier = [0]
    while frontier:
        v = frontier.pop()
        for e in out_edges[v]:
            w = dense_dst[e]
            if not seen[w]:
                seen[w] = True
                frontier.append(w)
    unreachable = [
        nodes[i].id
        for i in range(n)
        if not seen[i] and not (nodes[i].id in detached and not in_edges[i])
    ]
    for name in unreachable:
        problems.append(
            Problem("E003", f"node '{name}': unreachable from the entry '{nodes[0].id}'", node=name)
        )

    # Every cycle must contain a bounded edge: the graph without them must be acyclic.
    succ: list[list[int]] = [[] for _ in range(n)]
    self_loops: set[int] = set()
    for pe in plan_edges:
        if pe.max_cycles is None:
            succ[pe.src].append(pe.dst)
            if pe.src == pe.dst:
                self_loops.add(pe.src)
    for component in _unbounded_cycles(n, succ, self_loops):
        names = [nodes[i].id for i in component]
        cycle_edges = [
            f"'{nodes[pe.src].id} -> {nodes[pe.dst].id}'"
            for pe in plan_edges
            if pe.max_cycles is None and pe.src in component and pe.dst in component
        ]
        problems.append(
            Problem(
                "E002",
                f"cycle through nodes {', '.join(repr(x) for x in names)} has no edge with"
                f" max_cycles (edges: {', '.join(cycle_edges)})",
                node=names[0],
            )
        )
    if problems:
        raise PlaitError.from_problems(problems)

    back = _dfs_back_edges(n, out_edges, dense_dst)
    gating = tuple(tuple(e for e in in_edges[i] if e not in back) for i in range(n))
    return Plan(
        nodes=tuple(nodes),
        edges=tuple(plan_edges),
        reducers=reducers,
        index=index,
        out_edges=tuple(tuple(x) for x in out_edges),
        in_edges=tuple(tuple(x) for x in in_edges),
        back_edges=frozenset(back),
        gating_gen0=gating,
    )
