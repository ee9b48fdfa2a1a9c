"""Build the core's ``StepEnv`` for a workflow: the one place a definition becomes pure settings.

Everything injected here must be pure (it runs again, identically, in verify):
argument validation against pinned JSON Schemas, response-schema validation,
the token and usd reservation of one LLM turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import jsonschema

from plait.core.canonical import JSON, dumps, loads
from plait.core.env import DEFAULT_LLM_MAX_TOKENS, DEFAULT_MAX_EFFECTS_PER_ATTEMPT, Budgets, StepEnv
from plait.core.retry import RetryPolicy
from plait.driver.defaults import ENGINE_EPOCH
from plait.governance import flow_from_dict
from plait.models.base import unparsed_arguments

if TYPE_CHECKING:
    from plait.workflow.run_definition import RunDefinition


@lru_cache(maxsize=512)
def _compiled(schema_text: str) -> jsonschema.Draft202012Validator:
    """A schema's validator, compiled once per process for its canonical text: every run
    of a workflow offers the same tools, and a validator only reads its schema (a value
    of its own, parsed here, which nobody else holds)."""
    return jsonschema.Draft202012Validator(loads(schema_text))


def _validator(schemas: Mapping[str, Mapping[str, Any]]) -> Callable[[str, JSON], str | None]:
    """The first problem of a value against its schema, as the transcript shows it.

    Schema and value are taken in canonical key order: jsonschema reports errors in the
    order it walks the schema's keywords and shows values as Python reprs, and a run
    (the file's and the model's key order) must word them exactly as verify does (the
    manifest's and the journal's canonical order)."""
    compiled = {name: _compiled(dumps(dict(schema))) for name, schema in sorted(schemas.items())}

    def validate(name: str, value: JSON) -> str | None:
        checker = compiled.get(name)
        if checker is None:
            return None
        errors = sorted(
            checker.iter_errors(loads(dumps(value))), key=lambda e: list(e.absolute_path)
        )
        if not errors:
            return None
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(root)"
        return f"{where}: {first.message}"

    return validate


def _arguments_validator(
    schemas: Mapping[str, Mapping[str, Any]],
) -> Callable[[str, JSON], str | None]:
    """A model call's arguments against its tool's schema; arguments a provider sent that
    were not a JSON object are invalid whatever the schema (even a tool without one)."""
    against_schema = _validator(schemas)

    def validate(name: str, value: JSON) -> str | None:
        raw = unparsed_arguments(value)
        if raw is not None:
            shown = raw if len(raw) <= 200 else raw[:200] + "…"
            return f"(root): the arguments are not a JSON object: {shown!r}"
        return against_schema(name, value)

    return validate


def make_env(
    definition: RunDefinition, budgets: Budgets | None = None, *, epoch: int = ENGINE_EPOCH
) -> StepEnv:
    """The core's environment for ``definition``: the same one its pinned manifest gives.

    Built once per definition and epoch (``RunDefinition.envs``): a worker drives many
    runs on one cached definition, and rebuilding the plan, executors and validators was
    a good part of what a short run cost the client. ``budgets`` (a run's own ceilings)
    replace the pinned ones in a copy."""
    env = definition.envs.get(epoch)
    if env is None:
        env = env_from_manifest(definition.pinned, definition.tool_schemas, None, epoch=epoch)
        definition.envs[epoch] = env
    return env if budgets is None else replace(env, budgets=budgets)


def env_from_manifest(
    manifest: Mapping[str, Any],
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    budgets: Budgets | None = None,
    *,
    epoch: int = ENGINE_EPOCH,
) -> StepEnv:
    """The environment a run's pinned definition gives (``Workflow.to_manifest()`` shape).

    This is what verify uses: no workflow file, no tool module, no model is needed.
    ``schemas``: the tools' input schemas pinned at start (declared ones are in the
    manifest's tool entries already); ``epoch``: the engine epoch the run was written by
    (a new run's is ``ENGINE_EPOCH``).
    """
    from plait.workflow import manifest_executors, manifest_plan

    llm = dict(manifest.get("llm") or {})
    max_tokens = int(llm.get("max_tokens", DEFAULT_LLM_MAX_TOKENS))
    executors = manifest_executors(manifest)
    response_schemas = {
        node["id"]: executor.spec["response_schema"]
        for node, executor in zip(manifest["nodes"], executors, strict=True)
        if executor.kind == "abstract" and executor.spec.get("response_schema") is not None
    }
    flows = {
        node["id"]: flow_from_dict(executor.spec["flow"])
        for node, executor in zip(manifest["nodes"], executors, strict=True)
        if executor.kind == "abstract" and executor.spec.get("flow") is not None
    }
    tools: Mapping[str, Mapping[str, Any]] = manifest.get("tools", {})
    pinned = {n: t["input_schema"] for n, t in tools.items() if t.get("input_schema") is not None}
    pinned.update(schemas or {})
    reserve_usd = None
    if llm.get("model"):
        from plait.models.prices import reserve_usd_micros

        reserve_usd = reserve_usd_micros(str(llm["model"]), max_tokens, llm.get("prices"))
        for spec in llm.get("fallback") or ():  # a turn may be answered by the dearest one
            other = reserve_usd_micros(str(spec), max_tokens, llm.get("prices"))
            if other is not None and (reserve_usd is None or other > reserve_usd):
                reserve_usd = other
    return StepEnv(
        plan=manifest_plan(manifest),
        executors=executors,
        budgets=budgets or Budgets.from_json(manifest.get("budgets", {})),
        validate_args=_arguments_validator(pinned),
        validate_response=_validator(response_schemas),
        ask_ttl_sec=(manifest.get("asks") or {}).get("ttl_s"),
        llm_reserve_tokens=max_tokens,
        llm_reserve_usd_micros=reserve_usd,
        max_effects_per_attempt=int(
            llm.get("max_effects_per_attempt", DEFAULT_MAX_EFFECTS_PER_ATTEMPT)
        ),
        llm_tool_result_chars=llm.get("tool_result_chars"),
        llm_context_tokens=llm.get("context_tokens"),
        decide=llm.get("decide") or None,
        flows=flows,
        approval_tools=frozenset(n for n in sorted(tools) if tools[n].get("approval")),
        deferred_tools=frozenset(n for n in sorted(tools) if tools[n].get("deferred")),
        retry_policies={
            i: RetryPolicy.from_manifest(node["retry"])
            for i, node in enumerate(manifest["nodes"])
            if node.get("retry") is not None
        },
        engine_epoch=epoch,
    )
