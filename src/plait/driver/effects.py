"""Executing one tool effect and mapping what happens to an effect outcome.

This is the one place where exceptions become failure causes (ARCHITECTURE.md
§3.3): ``TimeoutError`` or exceeding ``timeout_s`` is Timeout, any other
exception ExecutorError (detail: exception type and message), a result that is
not JSON is ExecutorError.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any

from plait.core.canonical import CanonicalJSONError, dumps, loads
from plait.core.outcomes import Completed, EffectOutcome, Failed


def failure_from_exception(exc: BaseException) -> Failed:
    """Map an exception raised by an executor to its failure cause."""
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return Failed("Timeout", f"{type(exc).__name__}: {exc}".rstrip(": "))
    return Failed("ExecutorError", f"{type(exc).__name__}: {exc}")


def as_json_result(value: Any) -> EffectOutcome:
    """A tool's return value as a journaled result: canonical JSON or an ExecutorError."""
    try:
        return Completed(loads(dumps(value)))
    except CanonicalJSONError as exc:
        return Failed("ExecutorError", f"tool returned a value that is not JSON: {exc}")


async def call_python(
    fn: Callable[..., Any], kwargs: dict[str, Any], timeout_s: float | None
) -> EffectOutcome:
    """Run a Python tool: async functions directly, sync ones in the thread pool.

    A sync tool that overruns ``timeout_s`` is recorded as Timeout; its thread
    cannot be killed, so it runs on and its late result is discarded.
    """
    try:
        if inspect.iscoroutinefunction(fn):
            coro = fn(**kwargs)
        else:
            loop = asyncio.get_running_loop()
            # Carry context variables (current_call) into the worker thread.
            ctx = contextvars.copy_context()
            coro = loop.run_in_executor(None, functools.partial(ctx.run, fn, **kwargs))
        if timeout_s is not None:
            value = await asyncio.wait_for(coro, timeout_s)
        else:
            value = await coro
    except asyncio.CancelledError:
        raise
    except TimeoutError as exc:
        if timeout_s is not None and not str(exc):
            return Failed("Timeout", f"tool did not finish within {timeout_s:g} s")
        return failure_from_exception(exc)
    except Exception as exc:
        return failure_from_exception(exc)
    return as_json_result(value)
