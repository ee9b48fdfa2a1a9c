"""Fixtures of the HTTP API tests (helpers live in ``http_api.support``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from http_api.support import FLOWS, OWNER, TOKEN, Api
from plait.server import create_app


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    for item in FLOWS.iterdir():
        if item.is_file():
            shutil.copy(item, tmp_path / item.name)
    for name in ("PLAIT_DB", "PLAIT_NOW_MS", "PLAIT_CRASH_AT", "PLAIT_SERVE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLAIT_PRINCIPAL", OWNER)
    app = create_app(TOKEN, db=f"sqlite:///{tmp_path}/plait.db", poll_s=0.0, workflows=tmp_path)
    with TestClient(app) as client:
        yield Api(tmp_path, client)
