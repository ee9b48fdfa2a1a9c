"""Helpers of the HTTP API tests: a FastAPI TestClient on a real SQLite file.

The workflows of ``tests/hitl/flows`` are copied into the test's folder; the run's
owner is alice (``PLAIT_PRINCIPAL``), the server's token is ``TOKEN``. ``Api.cli``
runs the same verb in-process with ``--json`` against the same file, so a test can
hold an HTTP body against what ``plait VERB --json`` prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from plait.cli import app as cli_app

FLOWS = Path(__file__).resolve().parents[1] / "hitl" / "flows"
TOKEN = "test-token-4f1c"
OWNER = "alice"


class Api:
    """One server on ``folder/plait.db``: authenticated calls, and the CLI beside it."""

    def __init__(self, folder: Path, client: TestClient) -> None:
        self.folder = folder
        self.db = f"sqlite:///{folder}/plait.db"
        self.client = client
        self.auth = {"Authorization": f"Bearer {TOKEN}"}

    def get(self, path: str, **kw: Any) -> Any:
        return self.client.get(path, headers={**self.auth, **kw.pop("headers", {})}, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.client.post(path, json=body, headers=self.auth, **kw)

    def flow(self, name: str) -> str:
        return str(self.folder / f"{name}.yaml")

    def start(self, name: str, run_id: str, **fields: Any) -> dict[str, Any]:
        """Start a run (202: queued) and, unless ``detach``, drive it with ``resume`` (this
        app has no drivers of its own): its run object once it finishes or parks."""
        body = {"workflow": self.flow(name), "run_id": run_id, **fields}
        response = self.post("/runs", body)
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "queued"
        if fields.get("detach"):
            return response.json()
        driven = self.post(f"/runs/{quote(run_id, safe='')}/resume")
        assert driven.status_code == 200, driven.text
        return driven.json()

    def only_ask(self, run_id: str) -> dict[str, Any]:
        found = self.get(f"/runs/{run_id}/asks").json()["asks"]
        assert len(found) == 1, found
        return found[0]

    def events(self, run_id: str, query: str = "", **headers: str) -> str:
        with self.client.stream(
            "GET", f"/runs/{run_id}/events{query}", headers={**self.auth, **headers}
        ) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            return "".join(response.iter_text())

    def cli(self, *args: str) -> str:
        """``plait ARGS --db <this file> --json``, in-process; its stdout."""
        return self.cli_plain(*args, "--db", self.db, "--json")

    def cli_plain(self, *args: str) -> str:
        """``plait ARGS`` in-process, exactly as given; its stdout."""
        result = CliRunner().invoke(cli_app, list(args))
        assert result.stdout.strip(), result.output
        return result.stdout
