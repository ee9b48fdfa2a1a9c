"""Build the core's ``StepEnv`` for a workflow: the one place a definition becomes pure settings.

Everything injected here must be pure (it runs again, identically, in verify):
argument validation against pinned JSON Schemas, response-schema validation,
the token and usd reservation of one LLM turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import jsonschema

from plait.core.canonical import JSON
from plait.core.env import DEFAULT_LLM_MAX_TOKENS, DEFAULT_MAX_EFFECTS_PER_ATTEMPT, Budgets, StepEnv
from plait.governance import Flow, flow_from_dict
from plait.tools.python import input_schema

if TYPE_CHECKING:
    from plait.workflow import Workflow


def tool_schemas(workflow: Workflow) -> dict[str, Mapping[str, Any]]:
    """Each tool's input schema: declared, else read from the Python function's signature."""
    schemas: dict[str, Mapping[str, Any]] = {}
    for name in sorted(workflow.tools):
        tool = workflow.tools[name]
        if tool.input_schema is not None:
            schemas[name] = tool.input_schema
        elif tool.callable is not None:
            schemas[name] = input_schema(tool.callable)
    return schemas


def _validator(schemas: Mapping[str, Mapping[str, Any]]) -> Callable[[str, JSON], str | None]:
    compiled = {
        name: jsonschema.Draft202012Validator(schema) for name, schema in sorted(schemas.items())
    }

    def validate(name: str, value: JSON) -> str | None:
        checker = compiled.get(name)
        if checker is None:
            return None
        errors = sorted(checker.iter_errors(value), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(root)"
        return f"{where}: {first.message}"

    return validate


def make_env(workflow: Workflow, budgets: Budgets | None = None) -> StepEnv:
    """The core's environment for ``workflow`` (plan, executors, budgets, validators, knobs)."""
    llm = dict(workflow.llm or {})
    max_tokens = int(llm.get("max_tokens", DEFAULT_LLM_MAX_TOKENS))
    response_schemas = {
        node.id: node.response_schema for node in workflow.nodes if node.response_schema is not None
    }
    reserve_usd = None
    model = llm.get("model")
    if model:
        from plait.models.prices import reserve_usd_micros

        reserve_usd = reserve_usd_micros(str(model), max_tokens, llm.get("prices"))
    flows = {}
    for node in workflow.nodes:
        if node.kind == "abstract" and node.flow is not None:
            flows[node.id] = node.flow if isinstance(node.flow, Flow) else flow_from_dict(node.flow)
    tools = workflow.tools
    return StepEnv(
        flows=flows,
        approval_tools=frozenset(n for n in tools if tools[n].approval),
        deferred_tools=frozenset(n for n in tools if tools[n].deferred),
        plan=workflow.plan(),
        executors=workflow.executors(),
        budgets=budgets or workflow.to_budgets(),
        validate_args=_validator(tool_schemas(workflow)),
        validate_response=_validator(response_schemas),
        ask_ttl_sec=(workflow.asks or {}).get("ttl_s"),
        llm_reserve_tokens=max_tokens,
        llm_reserve_usd_micros=reserve_usd,
        max_effects_per_attempt=int(
            llm.get("max_effects_per_attempt", DEFAULT_MAX_EFFECTS_PER_ATTEMPT)
        ),
        llm_tool_result_chars=llm.get("tool_result_chars"),
        llm_context_tokens=llm.get("context_tokens"),
    )
