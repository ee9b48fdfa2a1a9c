"""Fixtures of the contract tests (helpers live in ``contract.support``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contract.support import FLOWS, Cli


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """A CLI on a fresh store in a fresh folder holding copies of ``flows/`` (the cwd)."""
    for item in FLOWS.iterdir():
        if item.is_dir():
            shutil.copytree(
                item, tmp_path / item.name, ignore=shutil.ignore_patterns("__pycache__")
            )
        elif item.is_file():
            shutil.copy(item, tmp_path / item.name)
    monkeypatch.chdir(tmp_path)
    return Cli(tmp_path)
