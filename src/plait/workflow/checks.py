"""The shape checks: what every part of a definition must be, as tables of rules.

Each key of each part (top level, node, tool, ask, llm, budgets, ...) has a rule
in a table below; ``judge`` walks a definition once, applies the tables and the
few checks that span parts (unknown tools, one source per tool, one kind per
node), then builds the core plan from whatever is usable, so every problem is
found in one pass. A problem is an ``Issue`` naming its place in the document;
the loader turns places into lines. Builder-made and file-read definitions go
through the same checks, so both fail the same way.

Governance flows (``flow:`` on an abstract node) are judged here too, by every pass of
``plait.governance.check`` against the node's tools and the keys the definition declares
it writes: errors are E027 issues at the node's ``flow`` key; the unwritten-key findings
are warnings (``flow_warnings``), which never make a definition invalid.

This module never raises for a bad definition and never reads a workflow file.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema

from plait import files
from plait.core.errors import PlaitError, Problem
from plait.core.plan import NODE_KINDS, EdgeSpec, NodeSpec, Plan, build_plan
from plait.core.reducers import REDUCERS
from plait.governance import Flow, check, flow_from_dict
from plait.tools.python import PYTHON_SPEC
from plait.workflow.agent_checks import agent_problems, detached, workflow_cycle
from plait.workflow.located import Place, plain, show
from plait.workflow.schedule_spec import file_schedule_problems

if TYPE_CHECKING:
    from plait.workflow.definition import EdgeDef, NodeDef, ToolDef, Workflow

DURABILITIES = ("normal", "strict")
ON_DANGLING = ("redeliver", "fail")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

KIND_KEYS = (("tool", "tool"), ("ask", "ask"), ("sleep_s", "timer"), ("workflow", "subgraph"))
"""Which key makes a node which kind; a node setting none of them is abstract (an LLM loop)."""
_ABSTRACT_ONLY = (
    "instruction", "tools", "response_schema", "flow", "tool_results_into", "agents", "handoffs",
)  # fmt: skip


def node_kind(
    tool: object = None, ask: object = None, sleep_s: object = None, workflow: object = None
) -> str:
    """The kind a node's settings make it (the first set wins; setting several is a problem)."""
    given = {"tool": tool, "ask": ask, "sleep_s": sleep_s, "workflow": workflow}
    return next((kind for key, kind in KIND_KEYS if given[key] is not None), "abstract")


Rule = Callable[[Any], str | None]
"""What a value must be: returns the complaint (``must be ..., got ...``) or None."""


@dataclass(frozen=True)
class Issue:
    """One problem, at its place in the document (the loader fills in the line)."""

    code: str
    message: str
    place: Place = ()
    line: int | None = None
    node: str | None = None
    edge: int | None = None

    def problem(self) -> Problem:
        return Problem(self.code, self.message, self.line, self.node, self.edge)


def _pinpoint(wf: Workflow, issues: list[Issue]) -> list[Issue]:
    """Name the node (by id) or edge (by index) each issue's place is about."""
    pinned = []
    for issue in issues:
        part, index = (*issue.place, "", "")[:2]
        node_id = wf.nodes[index].id if part == "nodes" and isinstance(index, int) else None
        pinned.append(
            dataclasses.replace(
                issue,
                node=node_id if isinstance(node_id, str) else None,
                edge=index if part == "edges" and isinstance(index, int) else None,
            )
        )
    return pinned


def hint(word: str, choices: Sequence[str]) -> str:
    """A suggestion for a misspelt key or name: the close match, else the choices."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    if close:
        return f" (did you mean '{close[0]}'?)"
    return f" (expected one of: {', '.join(choices)})" if choices else ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _want(ok: Any, wanted: str, value: Any) -> str | None:
    return None if ok else f"must be {wanted}, got {show(value)}"


def _rule(ok: Callable[[Any], Any], wanted: str) -> Rule:
    return lambda v: _want(ok(v), wanted, v)


MAX_INTEGER = 2**63 - 1
"""The largest count a file may set: what the stores keep in a 64-bit integer column."""
MAX_SECONDS = 10**15
"""The longest duration (``sleep_s``, ``ttl_s``, ``timeout_s``, ``max_wall_s``): in
milliseconds, added to any clock reading, it still fits a 64-bit integer."""
MAX_USD = 10**12
"""The largest dollar ceiling (``max_usd``): its micro-dollars fit a 64-bit integer."""
MAX_PRICE = 10**6
"""The largest price in dollars per million tokens."""


def _bounded(ok: bool, wanted: str, value: Any, maximum: int) -> str | None:
    """The complaint about a number: of the wrong kind, or larger than ``maximum``."""
    if ok and value > maximum:
        return f"must be <= {maximum}, got {show(value)}"
    return _want(ok, wanted, value)


def _integer(minimum: int, maximum: int = MAX_INTEGER) -> Rule:
    def rule(v: Any) -> str | None:
        return _bounded(_is_int(v) and v >= minimum, f"an integer >= {minimum}", v, maximum)

    return rule


def _number(above_zero: bool, maximum: int) -> Rule:
    def rule(v: Any) -> str | None:
        # An int too large for a float is out of range, not a crash of math.isfinite.
        ok = _is_int(v) or (isinstance(v, float) and math.isfinite(v))
        ok = ok and (v > 0 if above_zero else v >= 0)
        return _bounded(ok, "a number > 0" if above_zero else "a number >= 0", v, maximum)

    return rule


def _one_of(*choices: str) -> Rule:
    return _rule(lambda v: v in choices, " or ".join(f"'{c}'" for c in choices))


def _strings(nonempty: bool) -> Rule:
    def rule(v: Any) -> str | None:
        ok = isinstance(v, list | tuple) and all(isinstance(x, str) and x for x in v)
        wanted = "a non-empty list of strings" if nonempty else "a list of strings"
        return _want(ok and (bool(v) or not nonempty), wanted, v)

    return rule


def _schema(v: Any) -> str | None:
    if not isinstance(v, Mapping):
        return _want(False, "a JSON Schema (a mapping)", v)
    try:
        jsonschema.validators.validator_for(v).check_schema(dict(v))
    except jsonschema.SchemaError as exc:
        return f"is not a valid JSON Schema: {exc.message}"
    return None


def _model(v: Any) -> str | None:
    provider, sep, rest = v.partition(":") if isinstance(v, str) else ("", "", "")
    return _want(provider and sep and rest, "'provider:model' (e.g. 'openai:gpt-4o-mini')", v)


_TEXT = _rule(lambda v: isinstance(v, str), "a string")
_NAME = _rule(lambda v: isinstance(v, str) and v.strip(), "a non-empty string")
_FLAG = _rule(lambda v: isinstance(v, bool), "true or false")
_MAPPING = _rule(lambda v: isinstance(v, Mapping), "a mapping")
_PYTHON = _rule(lambda v: isinstance(v, str) and PYTHON_SPEC.match(v), "'module:function'")
_FLOW = _rule(lambda v: not isinstance(v, str | int | float | list), "a mapping or a file path")


# What each key of each part of a definition must be (file keys = field names).
TOP_RULES: dict[str, Rule] = {
    "name": _NAME, "description": _TEXT, "durability": _one_of(*DURABILITIES),
    "on_dangling": _one_of(*ON_DANGLING),
}  # fmt: skip
NODE_RULES: dict[str, Rule] = {
    "tool": _NAME, "retries": _integer(0), "instruction": _TEXT, "tools": _strings(False),
    "response_schema": _schema, "flow": _FLOW, "tool_results_into": _NAME, "ask": _MAPPING,
    "sleep_s": _number(False, MAX_SECONDS), "workflow": _NAME, "writes": _strings(False),
    "retry": _MAPPING, "agents": _strings(False), "handoffs": _strings(False),
    "output": _NAME,
}  # fmt: skip
TOOL_RULES: dict[str, Rule] = {
    "python": _PYTHON, "command": _strings(True), "mcp": _MAPPING, "description": _TEXT,
    "input_schema": _schema, "strict": _FLAG, "approval": _FLAG, "deferred": _FLAG,
    "writes": _strings(False), "timeout_s": _number(True, MAX_SECONDS),
}  # fmt: skip
ASK_RULES: dict[str, Rule] = {"prompt": _NAME, "approval": _FLAG, "output_schema": _schema}
_URL = _rule(lambda v: isinstance(v, str) and v.startswith(("http://", "https://")), "a URL")
_TEXTS = _rule(
    lambda v: isinstance(v, Mapping) and all(isinstance(x, str) for x in v.values()),
    "a mapping of names to strings",
)
MCP_RULES: dict[str, Rule] = {
    "command": _strings(True), "env": _TEXTS, "url": _URL, "headers": _TEXTS,
    "transport": _one_of("streamable-http", "sse"), "tool": _NAME, "tools": _one_of("*"),
}  # fmt: skip
LLM_RULES: dict[str, Rule] = {
    "model": _model, "max_tokens": _integer(1), "context_tokens": _integer(1),
    "tool_result_chars": _integer(1), "max_effects_per_attempt": _integer(1), "prices": _MAPPING,
    "timeout_s": _number(True, MAX_SECONDS), "max_retries": _integer(0),
    "fallback": _strings(True), "max_agent_depth": _integer(1), "decide": _MAPPING,
}  # fmt: skip
DECIDE_RULES: dict[str, Rule] = {
    "backend": _NAME, "offer": _MAPPING, "fold": _FLAG,
    "calibration": _rule(lambda v: isinstance(v, str | Mapping) and v, "a file name"),
}  # fmt: skip
PRICE_RULES: dict[str, Rule] = {
    "input_per_mtok": _number(False, MAX_PRICE), "output_per_mtok": _number(False, MAX_PRICE),
}  # fmt: skip
BUDGET_RULES: dict[str, Rule] = {
    "max_supersteps": _integer(1), "max_tokens": _integer(0), "max_usd": _number(False, MAX_USD),
    "max_wall_s": _number(True, MAX_SECONDS), "max_storage_bytes": _integer(0),
}  # fmt: skip
ASKS_RULES: dict[str, Rule] = {"ttl_s": _integer(1, MAX_SECONDS)}


def _at_least_one(v: Any) -> str | None:
    ok = _is_int(v) or (isinstance(v, float) and math.isfinite(v))
    return _bounded(ok and v >= 1, "a number >= 1", v, MAX_INTEGER)


def _fraction(v: Any) -> str | None:
    ok = _is_int(v) or (isinstance(v, float) and math.isfinite(v))
    return _want(ok and 0 <= v <= 1, "a number from 0 to 1", v)


RETRY_RULES: dict[str, Rule] = {
    "max_attempts": _integer(1, 1_000_000), "initial_s": _number(False, MAX_SECONDS),
    "multiplier": _at_least_one, "max_s": _number(False, MAX_SECONDS), "jitter": _fraction,
    "non_retryable": _strings(False),
}  # fmt: skip
"""A retry policy (``retry:`` at the top level or on a node; docs/workflow-files.md)."""

TOP_KEYS = ("name", "description", "durability", "nodes", "edges", "reducers", "tools",
            "llm", "budgets", "asks", "on_dangling", "retry", "schedules")  # fmt: skip
NODE_KEYS = ("id", *NODE_RULES)
EDGE_KEYS = ("from", "to", "when", "max_cycles")
TOOL_KEYS = tuple(TOOL_RULES)


class _Judge:
    """Collects issues about one definition."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []

    def add(self, code: str, message: str, place: Place) -> None:
        self.issues.append(Issue(code, message, place))

    def fields(
        self,
        values: Any,
        rules: Mapping[str, Rule],
        where: str,
        place: Place,
        required: Sequence[str] = (),
    ) -> None:
        """A mapping's unknown keys, missing required keys, and values that break their rule."""
        prefix = f"{where}: " if where else ""
        if not isinstance(values, Mapping):
            self.add("E019", f"{prefix}must be a mapping, got {show(values)}", place)
            return
        for key, value in values.items():
            rule = rules.get(key)
            if rule is None:
                self.add(
                    "E019", f"{prefix}unknown key '{key}'{hint(key, list(rules))}", (*place, key)
                )
            elif (complaint := rule(value)) is not None:
                self.add("E019", f"{prefix}{key} {complaint}", (*place, key))
        for key in required:
            if key not in values:
                self.add("E019", f"{prefix}missing required key '{key}'", place)


def _set_fields(obj: Any, rules: Mapping[str, Rule]) -> dict[str, Any]:
    return {key: getattr(obj, key) for key in rules if getattr(obj, key) is not None}


NO_MODEL = "abstract (LLM) node without a model: set llm.model"
"""PLAIT-E006's message; the top file adds that ``--model`` would do (a child file's not)."""


def judge(wf: Workflow, require_model: bool) -> tuple[list[Issue], list[Issue], Plan | None]:
    """(definition issues, plan issues, the plan when both are empty).

    ``require_model=False`` leaves out PLAIT-E006 (an abstract node without a model).
    """
    j = _Judge()
    top = {"description": wf.description, "durability": wf.durability}
    top |= {"on_dangling": wf.on_dangling, **({} if wf.name is None else {"name": wf.name})}
    j.fields(top, TOP_RULES, "", ())
    for key, name in wf.reducers.items():
        if name not in REDUCERS:
            why = f"unknown reducer {show(name)}{hint(str(name), REDUCERS)}"
            j.add("E019", f"reducer for key '{key}': {why}", ("reducers", key))
    if wf.llm is not None:
        _judge_llm(j, wf.llm, wf.base_dir)
    j.fields(wf.budgets, BUDGET_RULES, "budgets", ("budgets",))
    j.fields(wf.asks, ASKS_RULES, "asks", ("asks",))
    if wf.retry is not None:
        _judge_retry(j, wf.retry, "retry", ("retry",))
    for place, message in file_schedule_problems(list(wf.schedules)):
        j.add("E019", message, ("schedules", *place))
    for name, tool in wf.tools.items():
        _judge_tool(j, name, tool)
    if not wf.nodes:
        j.add("E019", "nodes: the workflow has no nodes (the first node is the entry)", ("nodes",))
    model = (wf.llm or {}).get("model")
    for i, node in enumerate(wf.nodes):
        _judge_node(j, wf, i, node)
        if node.kind == "abstract" and require_model and not model:
            j.add("E006", f"node '{node.id}': {NO_MODEL} or pass --model", ("nodes", i))
    for i, node in enumerate(wf.nodes):
        errors, _ = _flow_findings(wf, i, node)
        j.issues += errors
    cycle = workflow_cycle(wf)
    if cycle is not None:
        first = next(i for i, n in enumerate(wf.nodes) if n.id == cycle[0])
        why = f"a cycle of agents {' -> '.join(cycle)} has no bound; set llm.max_agent_depth"
        key = "agents" if cycle[1] in (wf.nodes[first].agents or ()) else "handoffs"
        j.add("E002", f"node '{cycle[0]}': {why}", ("nodes", first, key))
    edges = [_judge_edge(j, i, edge) for i, edge in enumerate(wf.edges)]
    plan_issues, plan = _plan(wf, edges)
    return _pinpoint(wf, j.issues), _pinpoint(wf, plan_issues), plan


def _judge_llm(j: _Judge, llm: Mapping[str, Any], base_dir: Path) -> None:
    j.fields(llm, LLM_RULES, "llm", ("llm",))
    specs: list[tuple[str, Place, Any]] = [("llm.model", ("llm", "model"), llm.get("model"))]
    fallback = llm.get("fallback")
    if isinstance(fallback, list | tuple):
        specs += [(f"llm.fallback[{i}]", ("llm", "fallback", i), f) for i, f in enumerate(fallback)]
    for field, place, spec in specs:
        _judge_spec(j, field, place, spec, base_dir)
    if isinstance(llm.get("decide"), Mapping):
        _judge_decide(j, llm["decide"], base_dir)
    prices = llm.get("prices")
    for spec, price in prices.items() if isinstance(prices, Mapping) else ():
        where = f"llm: price of '{spec}'"
        j.fields(price, PRICE_RULES, where, ("llm", "prices", spec), required=tuple(PRICE_RULES))


def _judge_decide(j: _Judge, decide: Mapping[str, Any], base_dir: Path) -> None:
    """``llm.decide`` (docs/decide.md): its fields, its backend installed here (PLAIT-E037)
    and its calibration file readable (PLAIT-E038)."""
    from plait.decide import check_backend, read_calibration

    place: Place = ("llm", "decide")
    j.fields(decide, DECIDE_RULES, "llm.decide", place)
    offer = decide.get("offer")
    if isinstance(offer, Mapping):
        rules = {"max_tools": _integer(1), "min_p": _fraction}
        j.fields(offer, rules, "llm.decide.offer", (*place, "offer"))
    backend = decide.get("backend", "local")
    if isinstance(backend, str) and backend.strip():
        try:
            check_backend(backend, base_dir)
        except PlaitError as exc:
            j.add(exc.code, f"llm.decide.backend: {exc.detail}", (*place, "backend"))
    calibration = decide.get("calibration")
    if isinstance(calibration, str) and calibration:
        try:
            read_calibration(base_dir / calibration)
        except PlaitError as exc:
            j.add(exc.code, f"llm.decide.calibration: {exc.detail}", (*place, "calibration"))


def _judge_spec(j: _Judge, field: str, place: Place, spec: Any, base_dir: Path) -> None:
    """A model spec that could only fail at its first turn is refused here (PLAIT-E006):
    ``openai-compatible:http://localhost:11434/v1`` has no model, not model ``11434/v1``."""
    if not isinstance(spec, str) or ":" not in spec:
        return  # the field rules have said what is wrong with it
    from plait.models.registry import PROVIDERS, spec_problem

    if spec.partition(":")[0] not in PROVIDERS:
        return  # an unknown provider is refused when a run would use it (E006 listing them)
    problem = spec_problem(spec)
    if problem is not None:
        j.add("E006", f"{field}: model '{spec}': {problem}", place)
    elif spec.startswith("scripted:"):
        script = spec.partition(":")[2]
        refusal = files.file_refusal(base_dir / script)
        if refusal is not None and refusal.missing:
            j.add("E004", f"{field}: scripted model file '{script}' not found", place)
        elif refusal is not None:
            shown = files.shown(script)
            j.add("E019", f"{field}: scripted model file '{shown}': {refusal.reason}", place)


def _judge_tool(j: _Judge, name: str, tool: ToolDef) -> None:
    where, place = f"tool '{name}'", ("tools", name)
    if not TOOL_NAME.match(name):
        j.add("E019", f"{where}: a tool name is 1-64 letters, digits, '_' or '-'", place)
    values = _set_fields(tool, TOOL_RULES)
    if tool.callable is not None:
        values.pop("python", None)  # a function given directly: its spec is only a label
    j.fields(values, TOOL_RULES, where, place)
    sources = [key for key in ("python", "command", "mcp") if key in values]
    if len(sources) != 1 and not (not sources and tool.callable is not None):
        got = " and ".join(sources) or "none"
        j.add("E019", f"{where}: give exactly one of python, command or mcp (got {got})", place)
    if isinstance(tool.mcp, Mapping):
        _judge_mcp(j, tool.mcp, f"{where}: mcp", (*place, "mcp"))
    if tool.approval is True and tool.deferred is True:
        message = f"{where}: a tool is either approval or deferred, not both"
        j.add("E019", message, (*place, "deferred"))


def _judge_mcp(j: _Judge, mcp: Mapping[str, Any], where: str, place: Place) -> None:
    """An MCP server is a ``command`` (stdio) or a ``url`` (HTTP), and the tool one ``tool``
    or ``tools: "*"`` (every tool it offers)."""
    j.fields(mcp, MCP_RULES, where, place)
    for one_of, pair in ((("command", "url"), "a server"), (("tool", "tools"), "its tools")):
        given = [key for key in one_of if key in mcp]
        if len(given) != 1:
            got = " and ".join(given) or "none"
            j.add("E019", f"{where}: give {pair} as {' or '.join(one_of)} (got {got})", place)
    for key, needs in (("env", "command"), ("headers", "url"), ("transport", "url")):
        if key in mcp and needs not in mcp:
            j.add("E019", f"{where}: {key} is only for a server given by {needs}", (*place, key))


def _judge_node(j: _Judge, wf: Workflow, i: int, node: NodeDef) -> None:
    place: Place = ("nodes", i)
    where = f"node '{node.id}'" if isinstance(node.id, str) else f"node #{i + 1}"
    if not isinstance(node.id, str):
        why = f"id must be a string, got {show(node.id)} (quote ids like yes, no, on, off)"
        j.add("E019", f"{where}: {why}", (*place, "id"))
    values = _set_fields(node, NODE_RULES)
    j.fields(values, NODE_RULES, where, place)
    kind_keys = [key for key, _ in KIND_KEYS if key in values]
    if len(kind_keys) > 1:
        why = f"sets {' and '.join(kind_keys)}; a node sets one of tool, ask, sleep_s, workflow"
        j.add("E019", f"{where}: {why}", (*place, kind_keys[1]))
    elif node.kind != node_kind(node.tool, node.ask, node.sleep_s, node.workflow):
        j.add("E019", f"{where}: kind {show(node.kind)} does not match its settings", place)
    for key in _ABSTRACT_ONLY if node.kind != "abstract" else ():
        if key in values:
            kind = f"an {node.kind}" if node.kind[:1] in "aeiou" else f"a {node.kind}"
            why = f"{key} is only for abstract (LLM) nodes; this is {kind} node"
            j.add("E019", f"{where}: {why}", (*place, key))
    if node.output is not None and node.kind != "tool":
        why = f"output is only for tool nodes (their result's key); this is a {node.kind} node"
        j.add("E019", f"{where}: {why}", (*place, "output"))
    if node.retry is not None:
        if node.kind not in ("tool", "abstract"):
            why = f"retry is only for tool and abstract (LLM) nodes; this is a {node.kind} node"
            j.add("E019", f"{where}: {why}", (*place, "retry"))
        elif "retries" in values and node.retries:
            why = "sets retries and retry; retries: k is short for retry: {max_attempts: k+1}"
            j.add("E019", f"{where}: {why}", (*place, "retry"))
        if isinstance(node.retry, Mapping):
            _judge_retry(j, node.retry, f"{where}: retry", (*place, "retry"))
    if isinstance(node.ask, Mapping):
        ask_place = (*place, "ask")
        j.fields(node.ask, ASK_RULES, f"{where}: ask", ask_place, required=("prompt",))
    named = [node.tool] if isinstance(node.tool, str) else []
    if isinstance(node.tools, list | tuple):
        named += [name for name in node.tools if isinstance(name, str)]
    whole = [n for n in named[:1] if node.tool == n and _whole_server(wf.tools.get(n))]
    for name in whole:
        why = f"tool '{name}' is a whole MCP server (tools: \"*\"); list it in an LLM node's tools"
        j.add("E019", f"{where}: {why}", (*place, "tool"))
    for name in named:
        if name not in wf.tools:
            key = "tool" if name == node.tool else "tools"
            j.add("E004", f"{where}: unknown tool '{name}'{_tool_hint(name, wf)}", (*place, key))
    refusal = (
        files.file_refusal(wf.base_dir / node.workflow) if isinstance(node.workflow, str) else None
    )
    if refusal is not None and refusal.missing:
        j.add("E004", f"{where}: workflow file '{node.workflow}' not found", (*place, "workflow"))
    elif refusal is not None:
        why = f"workflow file '{files.shown(str(node.workflow))}': {refusal.reason}"
        j.add("E019", f"{where}: {why}", (*place, "workflow"))
    for problem, key in agent_problems(wf, node):
        j.add("E004", f"{where}: {problem}", (*place, key))


def _whole_server(tool: ToolDef | None) -> bool:
    return tool is not None and isinstance(tool.mcp, Mapping) and tool.mcp.get("tools") == "*"


def _judge_retry(j: _Judge, policy: Any, where: str, place: Place) -> None:
    """A retry policy's keys and values, and that its cap is not below its first wait."""
    j.fields(policy, RETRY_RULES, where, place)
    if not isinstance(policy, Mapping):
        return
    initial, cap = policy.get("initial_s", 1), policy.get("max_s")
    numbers = all(_number(False, MAX_SECONDS)(v) is None for v in (initial, cap))
    if cap is not None and numbers and cap < initial:
        why = f"max_s ({show(cap)}) must be >= initial_s ({show(initial)})"
        j.add("E019", f"{where}: {why}", (*place, "max_s"))


def flow_warnings(wf: Workflow) -> list[Issue]:
    """Warnings of the nodes' governance flows (keys a guard reads that nothing declares
    it writes), at each node's ``flow`` key; they never make a definition invalid."""
    return _pinpoint(wf, [w for i, n in enumerate(wf.nodes) for w in _flow_findings(wf, i, n)[1]])


APPROVAL_KEYS = ("approved", "by", "reason")
"""What an approval's answer writes (§8): an ask node's into the context, an approval-required
tool's into the flow state of the node that called it."""


def declared_writes(wf: Workflow) -> list[str]:
    """Every key the definition says something writes: the ``writes`` of nodes and tools,
    node ids (a text answer lands under its node's id), ``tool_results_into``, the top-level
    properties of response and ask output schemas, and an approval's answer (of an ask node
    or of an ``approval: true`` tool). A deferred tool's answer is its result: its
    ``writes`` declare it."""
    keys = _context_writes(wf)
    if any(tool.approval is True for tool in wf.tools.values()):
        keys += APPROVAL_KEYS
    return list(dict.fromkeys(keys))


def _context_writes(wf: Workflow) -> list[str]:
    """``declared_writes`` but for what approval-required tools' answers write."""
    keys: list[str] = []
    for node in wf.nodes:
        if isinstance(node.id, str):
            keys.append(node.id)
        keys += _names(node.writes)
        if isinstance(node.tool_results_into, str):
            keys.append(node.tool_results_into)
        if isinstance(node.output, str):
            keys.append(node.output)
        keys += _schema_keys(node.response_schema)
        if isinstance(node.ask, Mapping):
            keys += _schema_keys(node.ask.get("output_schema"))
            if node.ask.get("approval") is True:
                keys += APPROVAL_KEYS
    for tool in wf.tools.values():
        keys += _names(tool.writes)
    return keys


def _approvals(wf: Workflow, tools: Sequence[str]) -> dict[str, list[str]]:
    """For each approval-required tool among a node's ``tools``: the keys only its own
    approval answer writes into the node's flow state (none when another approval-required
    tool of the node, or anything else, writes them too)."""
    gated = [t for t in dict.fromkeys(tools) if t in wf.tools and wf.tools[t].approval is True]
    if len(gated) != 1:
        return {}
    elsewhere = set(_context_writes(wf))
    return {gated[0]: [k for k in APPROVAL_KEYS if k not in elsewhere]}


def _names(value: Any) -> list[str]:
    """The strings of a ``writes`` list (whatever else a definition with errors holds)."""
    return [k for k in value if isinstance(k, str)] if isinstance(value, list | tuple) else []


def _schema_keys(schema: Any) -> list[str]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return [k for k in properties if isinstance(k, str)] if isinstance(properties, Mapping) else []


def _flow_findings(wf: Workflow, i: int, node: NodeDef) -> tuple[list[Issue], list[Issue]]:
    """(errors, warnings) of node ``i``'s flow: shape problems (``flow_from_dict``) or
    every pass of ``plait.governance.check``, each an E027 issue at the ``flow`` key."""
    raw = node.flow
    if node.kind != "abstract" or raw is None or _FLOW(raw) is not None:
        return [], []  # no flow, or one the node checks already complain about
    place: Place = ("nodes", i, "flow")
    where = f"node '{node.id}'" if isinstance(node.id, str) else f"node #{i + 1}"

    def issue(p: Problem) -> Issue:
        return Issue(p.code, f"{where}: flow: {p.message}", place)

    if isinstance(raw, Flow):
        flow = raw
    else:
        try:
            flow = flow_from_dict(plain(raw))
        except PlaitError as exc:
            return [issue(p) for p in exc.problems], []
    tools = [
        t
        for t in (node.tools if isinstance(node.tools, list | tuple) else wf.tools)
        if isinstance(t, str)
    ]
    found = check(flow, tools=tools, writes=declared_writes(wf), approvals=_approvals(wf, tools))
    return [issue(p) for p in found.errors], [issue(p) for p in found.warnings]


def _tool_hint(name: str, wf: Workflow) -> str:
    return hint(name, list(wf.tools)) if wf.tools else " (no tools are defined)"


def _judge_edge(j: _Judge, i: int, edge: EdgeDef) -> EdgeSpec | None:
    """Check an edge's values; return what the plan should see (None: leave it out)."""
    place: Place = ("edges", i)
    usable = isinstance(edge.src, str) and isinstance(edge.dst, str)
    where = f"edge '{edge.src} -> {edge.dst}'" if usable else f"edge #{i + 1}"
    j.fields({"from": edge.src, "to": edge.dst}, {"from": _NAME, "to": _NAME}, where, place)
    when = edge.when
    if when is not None and not isinstance(when, str):
        why = f"when must be a string (a condition), got {show(when)}"
        j.add("E005", f"{where}: {why}", (*place, "when"))
        when = None
    max_cycles = edge.max_cycles
    complaint = _integer(1)(max_cycles) if max_cycles is not None else None
    if complaint is not None:
        j.add("E019", f"{where}: max_cycles {complaint}", (*place, "max_cycles"))
        max_cycles = 1  # judged already; a bound keeps the cycle check quiet about it
    return EdgeSpec(edge.src, edge.dst, when, max_cycles) if usable else None


def _plan(wf: Workflow, edges: list[EdgeSpec | None]) -> tuple[list[Issue], Plan | None]:
    """Build the core plan from the usable parts; its problems become issues with places."""
    issues: list[Issue] = []
    specs: list[NodeSpec] = []
    first: dict[str, int] = {}
    for i, node in enumerate(wf.nodes):
        if not isinstance(node.id, str):
            continue
        if node.id in first:
            why = f"duplicate node id (first defined as node #{first[node.id] + 1})"
            issues.append(Issue("E019", f"node '{node.id}': {why}", ("nodes", i)))
            continue
        first[node.id] = i
        kind = node.kind if node.kind in NODE_KINDS else "abstract"
        retries = node.retries if _is_int(node.retries) and node.retries >= 0 else 0
        specs.append(NodeSpec(node.id, kind, retries))
    kept = [(i, e) for i, e in enumerate(edges) if e is not None]
    reducers = {k: v for k, v in wf.reducers.items() if v in REDUCERS}
    if not specs:
        return issues, None
    try:
        named = detached({k: getattr(n, k) for k in ("agents", "handoffs")} for n in wf.nodes)
        plan = build_plan(specs, [e for _, e in kept], reducers, detached=named)
    except PlaitError as exc:
        for p in exc.problems:
            place: Place = ()
            if p.edge is not None:
                place = ("edges", kept[p.edge][0], *(("when",) if p.code == "E005" else ()))
            elif p.node is not None and p.node in first:
                place = ("nodes", first[p.node])
            issues.append(Issue(p.code, p.message, place))
        return issues, None
    return issues, (plan if not issues else None)
