"""Fixtures of the retry-policy scenarios: the contract CLI on copies of ``flows/``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contract.support import Cli

FLOWS = Path(__file__).parent / "flows"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    shutil.copytree(
        FLOWS, tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    monkeypatch.chdir(tmp_path)
    return Cli(tmp_path)
