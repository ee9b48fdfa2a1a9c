"""Subprocess commands as tools: JSON on stdin, JSON on stdout (docs/architecture.md §4).

A command tool (``{command: ["python3", "send_email.py"], timeout_s: 30}``) runs
as its own process: never through a shell, with the workflow file's folder as
its working directory, and with the driver's environment plus
``PLAIT_TOOL_NAME`` and ``PLAIT_IDEMPOTENCY_KEY`` (the same key on a
redelivery, so a tool with side effects can deduplicate them). It gets a
session of its own, so a timeout (or a cancelled effect) kills it together with
every process it started.

This module reports what the process did; what that means for the run (which
failure cause, what detail) is decided in ``plait.driver.effects``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KILL_GRACE_S = 5.0
"""How long to wait for a killed process's pipes to close (a grandchild that left the
session can hold them open); after that the process is given up on."""


@dataclass(frozen=True)
class CommandResult:
    """What a finished (or killed) command did; ``returncode`` is None when it timed out."""

    returncode: int | None
    stdout: bytes
    stderr: bytes


async def run_command(
    argv: Sequence[str],
    input_json: str,
    *,
    cwd: Path,
    env_extra: Mapping[str, str],
    timeout_s: float | None,
) -> CommandResult:
    """Run ``argv`` with ``input_json`` on stdin and collect its output.

    Raises OSError when the process cannot be started (no such program, not
    executable); a process overrunning ``timeout_s`` is killed and reported
    with ``returncode=None``.
    """
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env={**os.environ, **env_extra},
        start_new_session=True,
    )
    try:
        stdout, stderr = await asyncio.wait_for(
            proc.communicate(input_json.encode("utf-8")), timeout_s
        )
    except TimeoutError:
        await _kill(proc)
        return CommandResult(None, b"", b"")
    except BaseException:  # the effect was cancelled: the process must not outlive it
        await _kill(proc)
        raise
    assert proc.returncode is not None
    return CommandResult(proc.returncode, stdout, stderr)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill the process's whole group (it leads its own session) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()  # in case it left its group before dying
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), KILL_GRACE_S)


def stderr_tail(stderr: bytes, *, lines: int = 10, chars: int = 2000) -> str:
    """The last lines of a command's stderr, as text fit for a failure detail."""
    text = stderr.decode("utf-8", errors="replace").strip()
    tail = "\n".join(text.splitlines()[-lines:])
    return tail if len(tail) <= chars else "…" + tail[-(chars - 1) :]
