"""A worker's definitions: built once per loaded file version, and only for runs pinning it.

A worker's ``Definitions(cache_files=True)`` hands every run of one file version the same
``RunDefinition`` (and ``make_env`` the same environment), instead of building the
definition, its manifest and its plan again for each run; a run pinned to another
version (the file changed since it started) still gets its own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from plait.core.env import Budgets
from plait.driver.environment import make_env
from plait.workflow.loader import load_workflow
from plait.workflow.run_definition import Definitions, definition_of

TOOLS = """
def one(n: int) -> dict:
    return {"a": n + 1}


def two(a: int) -> dict:
    return {"b": a * 2}
"""

FLOW = """name: pair
nodes:
  - {id: first, tool: one}
  - {id: second, tool: two}
edges:
  - {from: first, to: second}
tools:
  one: {python: "pairtools:one"}
  two: {python: "pairtools:two"}
"""


def manifest_of(path: Path) -> dict[str, Any]:
    """What a run started from the file as it is now pins (``starting``'s shape, read back)."""
    definition = definition_of(load_workflow(path))
    return {"run_id": "r", "source": str(path.resolve()), "workflow": definition.pinned}


def rewrite(path: Path, text: str) -> None:
    """A new version of the file that a cache keyed by mtime and size cannot miss."""
    path.write_text(text)
    later = time.time_ns() + 5_000_000_000
    os.utime(path, ns=(later, later))


def test_runs_of_one_file_version_share_a_definition_and_a_later_version_keeps_its_own(
    tmp_path: Path,
):
    (tmp_path / "pairtools.py").write_text(TOOLS)
    path = tmp_path / "pair.yaml"
    path.write_text(FLOW)
    v1 = manifest_of(path)
    definitions = Definitions(cache_files=True)

    first = definitions.pinned(v1)
    assert definitions.pinned(dict(v1)) is first  # built once for the version
    assert [n["id"] for n in first.pinned["nodes"]] == ["first", "second"]

    third = "  - {id: third, tool: two}\nedges:\n  - {from: second, to: third}"
    rewrite(path, FLOW.replace("edges:", third))
    v2 = manifest_of(path)
    newer = definitions.pinned(v2)
    assert definitions.pinned(v2) is newer
    assert [n["id"] for n in newer.pinned["nodes"]] == ["first", "second", "third"]

    older = definitions.pinned(v1)  # pinned before the change: its own version, rebuilt
    assert older is not newer
    assert [n["id"] for n in older.pinned["nodes"]] == ["first", "second"]
    assert older.pinned == first.pinned


def test_make_env_builds_a_definitions_environment_once_and_gives_each_run_its_budgets(
    tmp_path: Path,
):
    (tmp_path / "pairtools.py").write_text(TOOLS)
    path = tmp_path / "pair.yaml"
    path.write_text(FLOW)
    definition = definition_of(load_workflow(path))

    env = make_env(definition)
    assert make_env(definition) is env
    raised = Budgets(max_supersteps=7)
    own = make_env(definition, raised)
    assert own.budgets == raised and own.plan is env.plan
    assert make_env(definition).budgets == definition.budgets  # the pinned ones, untouched
    assert make_env(definition, epoch=1).plan is not env.plan  # another epoch: its own
