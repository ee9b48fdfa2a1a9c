"""Helpers of the contract tests: the `plait` CLI as an outside scenario sees it.

``cli`` runs the command in-process (``typer.testing.CliRunner`` behaves like the real
process for everything but the process boundary; the few tests where that boundary
matters start ``plait`` itself, see ``plait_process``). Each test gets its own folder
holding copies of ``flows/`` and its own SQLite store; the clock is ``PLAIT_NOW_MS`` and
the principal ``PLAIT_PRINCIPAL`` (alice unless a call says otherwise).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from plait.cli import app

FLOWS = Path(__file__).parent / "flows"
PLAIT = str(Path(sys.executable).parent / "plait")
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms
HOUR = 3_600_000
OWNER = "alice"

RUN_OBJECT_KEYS = {"run_id", "status", "outcome", "context", "asks", "spent", "folds"}
ASK_KEYS = {"ask_id", "node", "prompt", "input", "approval"}
"""Keys every ask has; ``tool_name`` (a tool call's ask) and ``expires_at`` (with
``asks.ttl_s``) only where they apply."""
SPENT_KEYS = {
    "supersteps",
    "input_tokens",
    "output_tokens",
    "usd_micros",
    "wall_ms",
    "elapsed_ms",
    "storage_bytes",
}
TRACE_KEYS = {
    "superstep",
    "node",
    "task_path",
    "attempt",
    "effect_seq",
    "kind",
    "status",
    "input",
    "usage",
    "redeliveries",
}


@dataclass
class Done:
    """One finished invocation: its exit code, stdout and stderr."""

    args: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str

    @property
    def data(self) -> dict[str, Any]:
        """The one JSON object on stdout (and nothing else there)."""
        lines = self.stdout.splitlines()
        assert len(lines) == 1, f"expected one JSON line on stdout:\n{self}"
        value = json.loads(lines[0])
        assert isinstance(value, dict), self
        return value

    @property
    def code(self) -> str:
        """The ``PLAIT-Ennn`` of the error object."""
        error = self.data["error"]
        assert set(error) >= {"code", "message"}, error
        assert isinstance(error["message"], str) and error["message"], error
        return str(error["code"])

    def __str__(self) -> str:
        return f"plait {' '.join(self.args)} -> {self.exit_code}\n{self.stdout}\n{self.stderr}"


class Cli:
    """``plait VERB ...`` in-process, with ``--db`` (this test's store) and ``--json``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.db_file = folder / "plait.db"
        self.db = f"sqlite:///{self.db_file}"
        self.runner = CliRunner()

    def raw(
        self,
        *args: str,
        now: int = T0,
        principal: str = OWNER,
        env: dict[str, str | None] | None = None,
    ) -> Done:
        """Exactly these arguments (no --db, no --json added)."""
        environ: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PLAIT_")}
        environ |= {"PLAIT_NOW_MS": str(now), "PLAIT_PRINCIPAL": principal, **(env or {})}
        result = self.runner.invoke(app, list(args), env=environ, catch_exceptions=False)
        return Done(tuple(args), result.exit_code, result.stdout, result.stderr)

    def __call__(self, *args: str, **kw: Any) -> Done:
        return self.raw(*args, "--db", self.db, "--json", **kw)

    def flow(self, name: str) -> str:
        return str(self.folder / name)

    def run(self, name: str, run_id: str, *extra: str, **kw: Any) -> Done:
        return self("run", self.flow(name), "--run-id", run_id, *extra, **kw)

    def only_ask(self, run_id: str) -> dict[str, Any]:
        asks = self("asks", run_id).data["asks"]
        assert len(asks) == 1, asks
        return dict(asks[0])

    def run_ids(self) -> list[str]:
        """Every run in the store (an absent store holds none)."""
        if not self.db_file.exists():
            return []
        return [r["run_id"] for r in self("runs").data["runs"]]


def plait_process(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed `plait` in a real process (only where the process boundary matters)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    environ |= {"PLAIT_NOW_MS": str(T0), "PLAIT_PRINCIPAL": OWNER, **(env or {})}
    return subprocess.run(
        [PLAIT, *args], capture_output=True, text=True, env=environ, cwd=cwd, timeout=60
    )
