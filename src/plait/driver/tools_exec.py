"""Runs a tool effect: finds the tool and calls it, in-process or as a subprocess.

A Python tool gets the input bound to its parameters; a command tool gets the
input as JSON on stdin, runs in the workflow file's folder, and learns its name
and the effect's idempotency key from its environment (ARCHITECTURE.md §4).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plait.core.events import Dispatch
from plait.core.outcomes import EffectOutcome, Failed
from plait.driver.call import CallInfo, set_current_call
from plait.driver.effects import call_command, call_python
from plait.tools.python import bind_arguments


class ToolRunner:
    """Executes dispatches against a workflow's tool definitions."""

    def __init__(self, tools: Mapping[str, Any], *, base_dir: Path | None = None) -> None:
        self._tools = tools
        # Where command tools run: the workflow file's folder (Workflow.base_dir).
        self._base_dir = base_dir if base_dir is not None else Path.cwd()

    async def call(
        self, name: str, dispatch: Dispatch, idempotency_key: str, alone: bool = False
    ) -> EffectOutcome:
        """Run tool ``name`` with the dispatch's input (a context, or a model's arguments)."""
        tool = self._tools.get(name)
        if tool is not None and tool.source_kind == "command":
            return await call_command(
                tool.command,
                dispatch.input,
                cwd=self._base_dir,
                env_extra={
                    "PLAIT_TOOL_NAME": name,
                    "PLAIT_IDEMPOTENCY_KEY": idempotency_key,
                },
                timeout_s=tool.timeout_s,
            )
        if tool is None or tool.callable is None:
            return Failed("ExecutorError", f"tool '{name}' is not available")
        try:
            # Each tool gets its own copy: a tool mutating its input must not change the run.
            kwargs = copy.deepcopy(bind_arguments(tool.callable, dispatch.input))
        except Exception as exc:
            return Failed("ExecutorError", f"{type(exc).__name__}: {exc}")
        key = dispatch.key
        # Each dispatch runs in its own asyncio task, so this does not leak between calls.
        set_current_call(
            CallInfo(
                key.run_id, key.node, key.task_path, key.attempt, key.effect_seq, idempotency_key
            )
        )
        return await call_python(tool.callable, kwargs, tool.timeout_s, inline=alone)
