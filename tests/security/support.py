"""Helpers of the security tests: a real ``plait serve`` with a token per role.

``Team.start`` makes a folder ``served/`` holding the workflows of ``tests/hitl/flows``
(the only folder the server serves), a folder ``outside/`` beside it with a workflow
and a secret the server must never open, tokens made with ``plait token add`` for one
principal per role — vera (viewer), olga (operator), april (approver), ada (admin) —
and starts ``plait serve --workflows served`` with the trusted token too.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from serve_driver.support import FLOW_DIRS, TOKEN, cli, served

PRINCIPALS = {"viewer": "vera", "operator": "olga", "approver": "april", "admin": "ada"}
SECRET = "root:$6$do-not-quote-me$:19000:0:99999:7:::"


def make_folders(root: Path) -> tuple[Path, Path]:
    served_dir, outside = root / "served", root / "outside"
    served_dir.mkdir()
    outside.mkdir()
    for item in FLOW_DIRS[0].iterdir():
        if item.is_file():
            shutil.copy(item, served_dir / item.name)
    shutil.copy(served_dir / "question.yaml", outside / "question.yaml")
    shutil.copy(served_dir / "hitl_tools.py", outside / "hitl_tools.py")
    (outside / "shadow.yaml").write_text(f"{SECRET}\nsecret_key: {SECRET}\n")
    return served_dir, outside


def add_tokens(db: str, cwd: Path) -> dict[str, str]:
    """A token per role (``plait token add --json``): role -> token."""
    made = {}
    for role, principal in PRINCIPALS.items():
        done = cli("token", "add", principal, "--role", role, "--db", db, "--json", cwd=cwd)
        assert done.returncode == 0, done.stdout + done.stderr
        made[role] = json.loads(done.stdout)["token"]
    return made


class Team:
    """One server and a client per role (``trusted``: the server's own token)."""

    def __init__(self, root: Path, base_url: str, db: str, tokens: dict[str, str]) -> None:
        self.root = root
        self.served = root / "served"
        self.outside = root / "outside"
        self.db = db
        self.tokens = tokens
        self.clients = {
            role: httpx.Client(
                base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
            )
            for role, token in {**tokens, "trusted": TOKEN}.items()
        }

    def as_role(self, role: str) -> httpx.Client:
        return self.clients[role]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


@contextmanager
def team(root: Path, *serve_args: str) -> Iterator[Team]:
    served_dir, _ = make_folders(root)
    db = f"sqlite:///{root}/plait.db"
    tokens = add_tokens(db, root)
    with served(root, db, "--workflows", str(served_dir), *serve_args) as server:
        running = Team(root, server.url, db, tokens)
        try:
            yield running
        finally:
            running.close()


def error_code(response: httpx.Response) -> str:
    body: Any = response.json()
    return str(body["error"]["code"])
