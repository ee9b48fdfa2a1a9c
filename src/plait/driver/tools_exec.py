"""Runs a tool effect: finds the tool and calls it, in-process, as a subprocess or over MCP.

A Python tool gets the input bound to its parameters; a command tool gets the
input as JSON on stdin, runs in the workflow file's folder, and learns its name
and the effect's idempotency key from its environment (docs/architecture.md §4). An
MCP tool is called on its server (one per command for the drive, started on
first use; ``aclose`` stops them when the drive ends).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plait.core.events import Dispatch
from plait.core.llm_loop import CALL_PREFIX
from plait.core.outcomes import Completed, EffectOutcome, Failed
from plait.core.parts import is_part
from plait.driver.call import set_current_call
from plait.driver.effects import call_command, call_inline, call_python, failure_from_exception
from plait.driver.parts_check import max_part_bytes, part_problem
from plait.tools.mcp import McpPool, tool_node_arguments
from plait.tools.python import bind_arguments


class ToolRunner:
    """Executes dispatches against a workflow's tool definitions."""

    def __init__(
        self,
        tools: Mapping[str, Any],
        *,
        base_dir: Path | None = None,
        mcp: McpPool | None = None,
    ) -> None:
        self._tools = tools
        # Where command tools run: the workflow file's folder (Workflow.base_dir).
        self._base_dir = base_dir if base_dir is not None else Path.cwd()
        # Servers started at run start to list the catalogue are reused, not restarted.
        self._mcp: McpPool | None = mcp
        # Whether each Python tool is an ``async def``: asked once per drive, not per call
        # (``inspect.iscoroutinefunction`` costs about as much as binding the arguments).
        self._is_async: dict[str, bool] = {}

    async def aclose(self) -> None:
        """Stop the MCP servers this runner started (the drive is over)."""
        if self._mcp is not None:
            pool, self._mcp = self._mcp, None
            await pool.aclose()

    async def call(
        self, name: str, dispatch: Dispatch, idempotency_key: str, alone: bool = False
    ) -> EffectOutcome:
        """Run tool ``name`` with the dispatch's input (a context, or a model's arguments)."""
        tool = self._tools.get(name)
        kind = None if tool is None else tool.source_kind
        if tool is not None and kind == "command":
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
        if tool is not None and kind == "mcp":
            return await self._call_mcp(tool, dispatch, idempotency_key)
        if tool is None or tool.callable is None:
            return Failed("ExecutorError", f"tool '{name}' is not available")
        try:
            kwargs = _own_copy(bind_arguments(tool.callable, dispatch.input))
        except Exception as exc:
            return Failed("ExecutorError", f"{type(exc).__name__}: {exc}")
        # Each dispatch runs in its own asyncio task, so this does not leak between calls.
        set_current_call(dispatch.key, idempotency_key)
        is_async = self._is_async.get(name)
        if is_async is None:
            is_async = self._is_async[name] = inspect.iscoroutinefunction(tool.callable)
        if alone and not is_async and tool.timeout_s is None:
            return call_inline(tool.callable, kwargs)
        return await call_python(tool.callable, kwargs, tool.timeout_s, is_async=is_async)

    async def _call_mcp(self, tool: Any, dispatch: Dispatch, idempotency_key: str) -> EffectOutcome:
        """A model's call passes its arguments; a tool node the context keys the schema names."""
        value = dispatch.input
        if not isinstance(value, Mapping):
            return Failed("ExecutorError", f"MCP tool '{tool.name}' takes an object of arguments")
        if not dispatch.executor.startswith(CALL_PREFIX):
            value = tool_node_arguments(tool.input_schema, value)
        if self._mcp is None:
            self._mcp = McpPool(self._base_dir)
        try:
            arguments = copy.deepcopy(value)
            outcome = await self._mcp.call(tool.mcp, arguments, tool.timeout_s, idempotency_key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return failure_from_exception(exc)
        return checked_parts(tool.name, outcome)


def checked_parts(tool: str, outcome: EffectOutcome) -> EffectOutcome:
    """An MCP result's images as a model could take them, else a failed call naming the
    part (PLAIT-E032): the model hears why, and no oversized image reaches the journal."""
    value = outcome.result if isinstance(outcome, Completed) else None
    parts = value.get("content") if isinstance(value, dict) else None
    if not isinstance(parts, list):
        return outcome
    limit = max_part_bytes()
    for index, part in enumerate(parts):
        problem = part_problem(part, limit) if is_part(part) else None
        if problem is not None:
            return Failed(
                "ExecutorError",
                f"PLAIT-E032 content part refused in MCP tool '{tool}''s result:"
                f" content[{index}]: {problem}",
            )
    return outcome


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def _own_copy(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The tool's own copy of its arguments: a tool mutating its input must not change
    the run. ``kwargs`` is a fresh dict; only values that can change need copying."""
    immutable = _IMMUTABLE
    for value in kwargs.values():  # a plain loop: all() over a generator costs more here
        if type(value) not in immutable:
            return copy.deepcopy(kwargs)
    return kwargs
