"""Journals recorded before issue #15's refactoring: they verify and read as they did.

``tests/fixtures/journals/runs.db`` holds runs recorded by ``record.py`` with the code of
before the refactoring (see the README there); ``expected/`` holds what ``show``,
``trace``, ``asks``, ``verify``, ``runs`` and ``asks`` printed then, at the clock of
``meta.json``. Every test works on a copy of runs.db in its own folder; the committed file
is never written. Checked per run:

- ``plait verify`` re-drives it from its journal byte for byte;
- every stored checkpoint decodes (``SchedulerState.from_json``) and encodes again
  (``to_json``, canonical ``dumpb``) to exactly its stored bytes;
- the readers print exactly what they printed at recording (no field depends on the
  path of the store or of the workflow files: nothing is normalised);
- a run left parked can still be answered and resumed to completion, and verifies.

A run's manifest pins the absolute path of its workflow file as recorded (its
``source``), which is where ``resume`` reloads it from; that path lies in the checkout
that recorded it, so resuming here maps it onto this checkout's ``workflows/`` folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import plait.workflow as workflow_package
from inprocess import run_cli
from plait.core.canonical import dumpb, loads
from plait.core.state import SchedulerState
from plait.driver.inspect_run import activity
from plait.store import open_store
from plait.workflow import load_workflow
from plait.workflow.pinned_plan import workflow_from_pinned
from plait.workflow.plan_hash import plan_hash

JOURNALS = Path(__file__).resolve().parents[1] / "fixtures" / "journals"
FLOWS = JOURNALS / "workflows"
EXPECTED = JOURNALS / "expected"
META: dict[str, Any] = json.loads((JOURNALS / "meta.json").read_text())
NOW_MS: int = META["now_ms"]
RUN_IDS: list[str] = META["runs"]
PLAIT = str(Path(sys.executable).parent / "plait")
HOUR = 3_600_000
EXIT_OF = {"completed": 0, "parked": 3}  # any other status of a finished run exits 1


def expected(name: str) -> Any:
    return json.loads((EXPECTED / f"{name}.json").read_text())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A copy of runs.db (already checkpointed: the one file holds every byte)."""
    copy = tmp_path / "runs.db"
    shutil.copyfile(JOURNALS / "runs.db", copy)
    return copy


def plait(
    db: Path, *args: str, now: int = NOW_MS, principal: str = META["principal"]
) -> subprocess.CompletedProcess[str]:
    """``plait ARGS --db DB --json`` in this process, at ``now``, as ``principal``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    env.update({"PLAIT_NOW_MS": str(now), "PLAIT_PRINCIPAL": principal})
    argv = [PLAIT, *args, "--db", f"sqlite:///{db}", "--json"]
    return run_cli(argv, env=env, cwd=db.parent)


def printed(done: subprocess.CompletedProcess[str], code: int = 0) -> Any:
    assert done.returncode == code, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def test_every_run_verifies_at_once(db: Path) -> None:
    report = printed(plait(db, "verify", "--all"))
    assert (report["verified"], report["failed"]) == (len(RUN_IDS), 0), report
    assert sorted(run["run_id"] for run in report["runs"]) == RUN_IDS


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_the_run_verifies_as_it_did(db: Path, run_id: str) -> None:
    report = printed(plait(db, "verify", run_id))
    assert report["verified"] is True, report
    assert report == expected(run_id)["verify"]


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_every_checkpoint_decodes_and_encodes_to_its_stored_bytes(db: Path, run_id: str) -> None:
    store = open_store(f"sqlite:///{db}")
    try:
        metas = store.load_journal(run_id).checkpoints
        assert metas, f"{run_id} has no checkpoint"
        for meta in metas:
            stored = store.read_checkpoint(run_id, meta.seq)  # its sha256 checked
            value = loads(stored)
            state = SchedulerState.from_json(value["scheduler"])
            again = dumpb({**value, "scheduler": state.to_json()})
            assert again == stored, f"{run_id}: checkpoint {meta.seq} (superstep {meta.superstep})"
    finally:
        store.close()


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_the_readers_print_what_they_printed(db: Path, run_id: str) -> None:
    want = expected(run_id)
    show = printed(plait(db, "show", run_id), EXIT_OF.get(want["show"]["status"], 1))
    # `plan_hash` came later (issue #16), an added field: the run's pinned plan by meaning.
    manifest = read_manifest(db, run_id)
    assert show.pop("plan_hash") == plan_hash(manifest["workflow"])
    # `activity` (show) and a trace entry's `tool`, `text` and `calls` came with issue #18,
    # added fields read from the same journal: checked against it, then set aside.
    traced = printed(plait(db, "trace", run_id))
    assert show.pop("activity", None) == activity(traced["entries"])
    assert show == want["show"]
    assert [without_names(e) for e in traced["entries"]] == want["trace"]["entries"]
    assert {k: v for k, v in traced.items() if k != "entries"} == {
        k: v for k, v in want["trace"].items() if k != "entries"
    }
    assert printed(plait(db, "asks", run_id)) == want["asks"]


def without_names(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("tool", "text", "calls")}


def read_manifest(db: Path, run_id: str) -> dict[str, Any]:
    store = open_store(f"sqlite:///{db}")
    try:
        return dict(store.manifests(run_id)[0])
    finally:
        store.close()


def test_the_store_lists_what_it_listed(db: Path) -> None:
    assert printed(plait(db, "runs")) == expected("_runs")
    assert printed(plait(db, "asks")) == expected("_asks")


# --- parked runs go on --------------------------------------------------------------------


@pytest.fixture
def workflows_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """``resume`` reloads a run's workflow from its pinned ``source``, a path in the checkout
    that recorded it: map that folder onto this checkout's ``workflows/``."""
    recorded = Path(META["workflows_root"])
    load = workflow_package.load_workflow

    def load_here(path: str | os.PathLike[str], *args: Any, **kw: Any) -> Any:
        where = Path(path)
        if where.is_relative_to(recorded):
            where = FLOWS / where.relative_to(recorded)
        return load(where, *args, **kw)

    # Every plait module that bound the loader by name (the definition layer reads files).
    for name, module in sorted(sys.modules.items()):
        if name.startswith("plait.") and getattr(module, "load_workflow", None) is load:
            monkeypatch.setattr(module, "load_workflow", load_here)


def only_ask(db: Path, run_id: str) -> dict[str, Any]:
    (ask,) = printed(plait(db, "asks", run_id))["asks"]
    return dict(ask)


def answer_parked_question(db: Path) -> int:
    ask = only_ask(db, "parked-question")
    done = plait(db, "respond", "parked-question", ask["ask_id"], "--result", '{"account": "A"}')
    printed(done)
    return NOW_MS


def answer_parked_approval(db: Path) -> int:
    ask = only_ask(db, "parked-approval")
    printed(plait(db, "approve", "parked-approval", ask["ask_id"], principal="bob"))
    return NOW_MS


def answer_parked_subgraph(db: Path) -> int:
    ask = only_ask(db, "parked-subgraph")  # the child's ask, answered through the parent
    assert ask["run_id"].startswith("parked-subgraph~")
    done = plait(db, "respond", "parked-subgraph", ask["ask_id"], "--result", '{"note": "n"}')
    printed(done)
    return NOW_MS


def let_the_timer_come_due(db: Path) -> int:
    assert printed(plait(db, "asks", "timer-parked")) == {"asks": []}
    return NOW_MS + HOUR


PARKED = {
    "parked-question": answer_parked_question,
    "parked-approval": answer_parked_approval,
    "parked-subgraph": answer_parked_subgraph,
    "timer-parked": let_the_timer_come_due,
}


def test_every_parked_run_of_the_fixture_is_resumed_here() -> None:
    parked = {r for r in RUN_IDS if expected(r)["show"]["status"] == "parked" and "~" not in r}
    assert parked == set(PARKED)


@pytest.mark.parametrize("run_id", sorted(PARKED))
@pytest.mark.usefixtures("workflows_here")
def test_a_parked_run_goes_on_to_completion_and_verifies(db: Path, run_id: str) -> None:
    now = PARKED[run_id](db)
    done = printed(plait(db, "resume", run_id, now=now))
    assert done["status"] == "completed", done
    assert done["asks"] == []
    for run in [run_id, *(r for r in RUN_IDS if r.startswith(run_id + "~"))]:
        report = printed(plait(db, "verify", run, now=now))
        assert (report["verified"], report["up_to"]) == (True, "terminal"), report


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_every_run_can_be_rebuilt_from_the_version_it_pinned(db: Path, run_id: str) -> None:
    # A run whose file changed in meaning goes on on its own version, rebuilt from its
    # manifest (issue #16): every recorded run, of every feature, rebuilds exactly.
    manifest = read_manifest(db, run_id)
    if manifest.get("source") is None:
        pytest.skip("started from Python: no folder to resolve its tools in")
    recorded = Path(META["workflows_root"])
    manifest["source"] = str(FLOWS / Path(manifest["source"]).relative_to(recorded))

    rebuilt = workflow_from_pinned(manifest)

    assert plan_hash(rebuilt.to_manifest()) == plan_hash(manifest["workflow"])


@pytest.mark.parametrize("run_id", RUN_IDS)
def test_every_run_replays_identically_against_its_own_file(db: Path, run_id: str) -> None:
    # `verify --workflow` with a version equal in meaning (the file the run started from):
    # tool, LLM, governed, Send, subgraph and forked runs all replay identically.
    manifest = read_manifest(db, run_id)
    if manifest.get("source") is None:
        pytest.skip("started from Python: no file to replay against")
    recorded = Path(META["workflows_root"])
    here = FLOWS / Path(manifest["source"]).relative_to(recorded)
    model = (manifest["workflow"].get("llm") or {}).get("model")
    if model is not None and model != (load_workflow(here).llm or {}).get("model"):
        pytest.skip("started with --model: its file names another model")

    report = printed(plait(db, "verify", run_id, "--workflow", str(here)))

    assert (report["verified"], report.get("diverged_at")) == (True, None), report
