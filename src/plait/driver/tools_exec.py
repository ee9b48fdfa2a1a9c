"""Runs a tool node's effect: finds the tool, binds the context to its arguments, calls it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plait.core.canonical import dumps, loads
from plait.core.events import Dispatch
from plait.core.keys import idempotency_key
from plait.core.outcomes import EffectOutcome, Failed
from plait.driver.call import CallInfo, set_current_call
from plait.driver.effects import call_python
from plait.tools.python import bind_arguments


class ToolRunner:
    """Executes dispatches against a workflow's tool definitions."""

    def __init__(self, tools: Mapping[str, Any]) -> None:
        self._tools = tools

    async def __call__(self, dispatch: Dispatch) -> EffectOutcome:
        tool = self._tools.get(dispatch.executor)
        if tool is None or tool.callable is None:
            return Failed("ExecutorError", f"tool '{dispatch.executor}' is not available")
        # Each tool gets its own copy: a tool mutating its input must not change the run.
        context = loads(dumps(dispatch.input))
        try:
            kwargs = bind_arguments(tool.callable, context)
        except Exception as exc:
            return Failed("ExecutorError", f"{type(exc).__name__}: {exc}")
        key = dispatch.key
        idem = idempotency_key(key, dispatch.input)
        # Each dispatch runs in its own asyncio task, so this does not leak between calls.
        set_current_call(
            CallInfo(key.run_id, key.node, key.task_path, key.attempt, key.effect_seq, idem)
        )
        return await call_python(tool.callable, kwargs, tool.timeout_s)
