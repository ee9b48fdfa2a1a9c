"""Executing one tool effect and mapping what happens to an effect outcome.

This is the one place where exceptions become failure causes (docs/architecture.md
§3.3): ``TimeoutError`` or exceeding ``timeout_s`` is Timeout, any other
exception ExecutorError (detail: exception type and message; ``sys.exit()`` in a
Python tool too), a result that is not JSON is ExecutorError. For a subprocess tool
the same holds of what the process did: overrunning ``timeout_s`` is Timeout; a
non-zero exit (detail: the status and the last lines of stderr) or stdout that is
not JSON is ExecutorError.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from plait.core.canonical import CanonicalJSONError, dumps, loads
from plait.core.outcomes import Completed, EffectOutcome, Failed
from plait.tools.command import run_command, stderr_tail


def failure_from_exception(exc: BaseException) -> Failed:
    """Map an exception raised by an executor to its failure cause."""
    name = type(exc).__name__  # journaled: what a retry policy's non_retryable names
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return Failed("Timeout", f"{name}: {exc}".rstrip(": "), name)
    return Failed("ExecutorError", f"{name}: {exc}", name)


def as_json_result(value: Any) -> EffectOutcome:
    """A tool's return value as a journaled result: canonical JSON or an ExecutorError.

    The result is a fresh value, as its canonical text parses (the tool keeps its own
    object); a flat object of plain scalars is copied in key order instead, which is the
    same value without parsing it back."""
    try:
        text = dumps(value)
        size = len(text.encode("utf-8"))  # a lone surrogate has no canonical bytes
        if type(value) is dict and len(value) <= _FLAT_KEYS and _flat(value):
            # key order: canonical (sorted); one key is in order already
            flat = dict(value) if len(value) < 2 else {k: value[k] for k in sorted(value)}
            return Completed(flat, size=size, text=text)
        return Completed(loads(text), size=size, text=text)
    except UnicodeEncodeError as exc:
        return Failed(
            "ExecutorError", f"tool returned text that is not valid Unicode: {exc.reason}"
        )
    except CanonicalJSONError as exc:
        return Failed("ExecutorError", f"tool returned a value that is not JSON: {exc}")


_FLAT_KEYS = 16
_SCALARS = frozenset({str, int, bool, type(None)})
"""Types whose values parse back from their canonical text as the very same value (a
float is left to the parser: its text is what the value is)."""


def _flat(value: dict[Any, Any]) -> bool:
    """Every key a str and every value a plain scalar (no subclass, no container)."""
    scalars = _SCALARS
    for k, v in value.items():  # noqa: SIM110 (all() over a generator costs more here)
        if type(k) is not str or type(v) not in scalars:
            return False
    return True


async def call_python(
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    timeout_s: float | None,
    *,
    is_async: bool | None = None,
) -> EffectOutcome:
    """Run a Python tool: async functions directly, sync ones in the thread pool (one
    alone in its wave with no ``timeout_s`` is the caller's to run with ``call_inline``).

    A sync tool that overruns ``timeout_s`` is recorded as Timeout; its thread
    cannot be killed, so it runs on and its late result is discarded. ``is_async``:
    whether ``fn`` is an ``async def``, if the caller knows (else it is asked here).
    """
    if is_async is None:
        is_async = inspect.iscoroutinefunction(fn)
    try:
        if is_async:
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
    except (Exception, SystemExit) as exc:  # a tool calling sys.exit() fails, not the driver
        return failure_from_exception(exc)
    return as_json_result(value)


def call_inline(fn: Callable[..., Any], kwargs: dict[str, Any]) -> EffectOutcome:
    """Run a sync Python tool on this thread: for one alone in its wave with no
    ``timeout_s``, where nothing runs beside it, so the thread hop buys nothing (and no
    coroutine is built around the call)."""
    try:
        return as_json_result(fn(**kwargs))
    except (Exception, SystemExit) as exc:  # a tool calling sys.exit() fails, not the driver
        return failure_from_exception(exc)


async def call_command(
    argv: Sequence[str],
    input_value: Any,
    *,
    cwd: Path,
    env_extra: Mapping[str, str],
    timeout_s: float | None,
) -> EffectOutcome:
    """Run a subprocess tool: ``input_value`` as JSON on stdin, its stdout read as JSON."""
    try:
        ran = await run_command(
            argv, dumps(input_value), cwd=cwd, env_extra=env_extra, timeout_s=timeout_s
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the process could not be started
        return failure_from_exception(exc)
    if ran.returncode is None:  # killed after overrunning timeout_s
        return Failed("Timeout", f"command did not finish within {timeout_s:g} s")
    if ran.returncode != 0:
        status = f"command exited with status {ran.returncode}"
        if ran.returncode < 0:
            status += f" (killed by {_signal_name(-ran.returncode)})"
        tail = stderr_tail(ran.stderr)
        return Failed("ExecutorError", f"{status}: {tail}" if tail else status)
    try:
        text = ran.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Failed("ExecutorError", f"command output is not UTF-8 text (byte {exc.start})")
    if not text.strip():
        return Failed("ExecutorError", "command printed nothing; a command tool prints JSON")
    try:
        return Completed(loads(text))
    except CanonicalJSONError as exc:
        return Failed("ExecutorError", f"command output is not JSON: {exc}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
