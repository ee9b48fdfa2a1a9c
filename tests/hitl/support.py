"""Helpers: the `plait` CLI on a real SQLite file, with a fake clock.

With ``processes=True`` every call is a NEW process: a parked run has to survive the
exit of the one that parked it (test_park_resume.py, the crash tests). Otherwise a call
runs the same CLI in this process (typer's runner), which is about 50x cheaper; each
call still opens, uses and closes the store, so what a verb sees it read from the file.
A call that sets ``PLAIT_CRASH_AT`` always gets its own process: it is killed. The clock
is `PLAIT_NOW_MS` (fixed per call, so "three hours later" is one environment variable);
the principal is `PLAIT_PRINCIPAL` (the run's owner is alice unless a test says
otherwise). The workflows of `flows/` are copied into the test's own folder, so a test
may rewrite a scripted model file next to them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inprocess import run_plait
from plait.driver.answers import pending_asks
from plait.driver.run_view import RunView
from plait.store import open_store
from plait.store.base import Store
from plait.store.records import Record

PLAIT = str(Path(sys.executable).parent / "plait")
FLOWS = Path(__file__).parent / "flows"

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, in ms
SECOND = 1_000
HOUR = 3_600 * SECOND
OWNER = "alice"


@dataclass
class Call:
    """One finished `plait` process: exit code and its one JSON object."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def data(self) -> dict[str, Any]:
        assert self.stdout.strip(), f"plait {' '.join(self.args)} printed nothing: {self.stderr}"
        return json.loads(self.stdout)

    @property
    def code(self) -> str | None:
        """The PLAIT-Ennn code of a refused command."""
        return self.data.get("error", {}).get("code")

    def __str__(self) -> str:
        return f"plait {' '.join(self.args)} -> {self.returncode}\n{self.stdout}\n{self.stderr}"


class Plait:
    """Runs `plait VERB ... --db URL --json` against one SQLite file in ``folder``."""

    def __init__(self, folder: Path, *, processes: bool = True) -> None:
        self.folder = folder
        self.db = f"sqlite:///{folder}/plait.db"
        self.db_file = folder / "plait.db"
        self.processes = processes

    def __call__(
        self,
        *args: str,
        now: int = T0,
        principal: str = OWNER,
        env: dict[str, str] | None = None,
    ) -> Call:
        full = (*args, "--db", self.db, "--json")
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
        environ.update({"PLAIT_NOW_MS": str(now), "PLAIT_PRINCIPAL": principal, **(env or {})})
        run = subprocess.run if self.processes else run_plait
        done = run(
            [PLAIT, *full],
            capture_output=True,
            text=True,
            env=environ,
            cwd=self.folder,
            timeout=120,
        )
        return Call(tuple(args), done.returncode, done.stdout, done.stderr)

    def flow(self, name: str) -> str:
        return str(self.folder / f"{name}.yaml")

    def run(self, name: str, run_id: str, *extra: str, **kw: Any) -> Call:
        return self("run", self.flow(name), "--run-id", run_id, *extra, **kw)

    def only_ask(self, run_id: str) -> dict[str, Any]:
        """The run's one pending ask (read in-process: `plait asks` is tested on its own)."""
        with self.store() as store:
            found = pending_asks(store, run_id)
        assert len(found) == 1, found
        return found[0]

    def scripted(self, responses: list[dict[str, Any]]) -> None:
        """(Re)write the scripted model file the LLM workflows read."""
        (self.folder / "answers.json").write_text(json.dumps(responses))

    @contextmanager
    def store(self) -> Iterator[Store]:
        store = open_store(self.db)
        try:
            yield store
        finally:
            store.close()

    def records(self, run_id: str, kind: str | None = None) -> list[Record]:
        with self.store() as store:
            found = store.load_journal(run_id).records
        return [r for r in found if kind is None or r.kind == kind]

    def trace(self, run_id: str) -> list[dict[str, Any]]:
        """`plait trace`'s entries, read in-process (the same function the verb prints)."""
        with self.store() as store:
            return RunView(store, run_id).trace()

    def verify(self, run_id: str) -> dict[str, Any]:
        done = self("verify", run_id)
        assert done.returncode == 0, done
        report = done.data
        assert report["verified"] is True, report
        return report
