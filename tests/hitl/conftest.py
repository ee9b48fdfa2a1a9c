"""Fixtures of the human-in-the-loop tests (helpers live in ``hitl.support``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hitl.support import FLOWS, Plait


@pytest.fixture
def plait(tmp_path: Path) -> Plait:
    for item in FLOWS.iterdir():
        if item.is_file():
            shutil.copy(item, tmp_path / item.name)
    return Plait(tmp_path, processes=False)
