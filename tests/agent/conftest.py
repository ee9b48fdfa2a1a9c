"""Fixtures for the agent tests: a throwaway database and scripted model files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def scripted(tmp_path: Path) -> Callable[[list[dict[str, Any]]], str]:
    """``scripted(responses)`` writes a scripted model file and returns its spec."""
    count = 0

    def write(responses: list[dict[str, Any]]) -> str:
        nonlocal count
        count += 1
        path = tmp_path / f"answers-{count}.json"
        path.write_text(json.dumps(responses))
        return f"scripted:{path}"

    return write
