"""Helpers of the server-driver tests: real ``plait serve`` processes on one store.

``Served`` starts ``plait serve --port 0 --json`` in a folder holding the workflows of
``tests/hitl/flows`` and ``flows/`` here, reads where it listens from its one stdout
object, and speaks HTTP to it. Runs belong to alice (``PLAIT_PRINCIPAL``); approvals
name bob. Waiting is polling for an outcome under a generous deadline, never a sleep.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from workers.support import PLAIT, wait_for

HERE = Path(__file__).resolve().parent
FLOW_DIRS = (HERE.parent / "hitl" / "flows", HERE / "flows")
TOKEN = "serve-driver-token-7d2e"
OWNER = "alice"


def copy_flows(folder: Path) -> None:
    for flows in FLOW_DIRS:
        for item in flows.iterdir():
            if item.is_file():
                shutil.copy(item, folder / item.name)


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return {**env, "PLAIT_PRINCIPAL": OWNER}


class Served:
    """One ``plait serve`` process: its URL, authenticated calls, its log."""

    def __init__(self, proc: subprocess.Popen[str], url: str, folder: Path, log: Path) -> None:
        self.proc = proc
        self.url = url
        self.folder = folder
        self.log = log
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
        )

    def flow(self, name: str) -> str:
        return str(self.folder / f"{name}.yaml")

    def post(self, path: str, body: Any = None, **params: Any) -> httpx.Response:
        return self.http.post(path, json=body, params=params)

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path)

    def start(self, name: str, run_id: str, **fields: Any) -> dict[str, Any]:
        """Start a run and wait for it to park or finish (``?wait=``): its run object."""
        body = {"workflow": self.flow(name), "run_id": run_id, **fields}
        response = self.post("/runs", body, wait=120)
        assert response.status_code == 200, response.text
        return response.json()

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.get(f"/runs/{quote(run_id, safe='')}")
        assert response.status_code == 200, response.text
        return response.json()

    def asks(self, run_id: str) -> list[dict[str, Any]]:
        response = self.get(f"/runs/{quote(run_id, safe='')}/asks")
        assert response.status_code == 200, response.text
        return list(response.json()["asks"])

    def approve(self, ask: dict[str, Any]) -> None:
        path = f"/runs/{quote(ask['run_id'], safe='')}/asks/{ask['ask_id']}/approve"
        response = self.post(path, {"as": "bob"})
        assert response.status_code == 200, response.text

    def respond(self, ask: dict[str, Any], result: Any) -> None:
        path = f"/runs/{quote(ask['run_id'], safe='')}/asks/{ask['ask_id']}/respond"
        response = self.post(path, {"result": result, "as": "bob"})
        assert response.status_code == 200, response.text

    def wait_status(self, run_id: str, *statuses: str, timeout: float = 120) -> dict[str, Any]:
        """The run object once its status is one of ``statuses`` (polled; no resume call)."""
        seen: dict[str, Any] = {}

        def reached() -> bool:
            seen.update(self.run(run_id))
            return seen["status"] in statuses

        wait_for(reached, f"run {run_id} to be {'/'.join(statuses)}", timeout)
        return seen

    def stop(self) -> str:
        """SIGTERM; the server's log once it exited."""
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)
        return self.log.read_text()


@contextmanager
def served(
    folder: Path, db: str, *args: str, name: str = "serve", env: dict[str, str] | None = None
) -> Iterator[Served]:
    """``plait serve --db DB ARGS`` in ``folder`` until the block ends (then SIGTERM)."""
    log = folder / f"{name}.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [PLAIT, "serve", "--port", "0", "--json", "--db", db, "--token", TOKEN, *args],
            cwd=folder,
            env={**server_env(), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, f"plait serve did not start: {log.read_text()}"
        line = proc.stdout.readline()
        assert line, f"plait serve exited: {log.read_text()}"
        server = Served(proc, json.loads(line)["url"], folder, log)
        try:
            yield server
        finally:
            server.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PLAIT, *args], cwd=cwd, env=server_env(), capture_output=True, text=True, timeout=300
    )


__all__ = ["Served", "cli", "copy_flows", "served", "wait_for"]
