"""What each quick verb does NOT import (issue #22, target 4: an instant ``plait``).

A person typing ``plait runs`` waits for Python to import what ``runs`` needs. Each verb
runs in a fresh process on a copy of the committed fixture store, and the modules it
imported are read from ``sys.modules`` at exit: the driver, the executors, the workflow
loader and their libraries stay out of the verbs that only read. The timing itself is in
``bench/cli_start.py``, never here.
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import plait
import plait.workflow
from plait.cli import app
from plait.cli.verbs import VERBS, LazyVerbs, Stub, load

FIXTURE_DB = Path(__file__).parents[1] / "fixtures" / "journals" / "runs.db"

PROBE = """
import json, sys
from plait.cli import main
sys.argv = ["plait", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stderr.write("\\nMODULES " + json.dumps({"exit": code, "modules": sorted(sys.modules)}))
"""

DRIVING = (
    "plait.core.step",
    "plait.driver.wave",
    "plait.driver.driving",
    "plait.driver.dispatcher",
    "plait.driver.inprocess",
    "plait.driver.verify",
    "plait.driver.llm_exec",
    "plait.driver.tools_exec",
)
"""What drives a run: never needed to read one."""

LOADING = (
    "plait.workflow.definition",
    "plait.workflow.loader",
    "plait.workflow.checks",
    "plait.workflow.run_definition",
    "plait.tools",
    "plait.models",
    "plait.agent",
    "plait.server",
    "jsonschema",
    "yaml",
    "croniter",
)
"""What builds and checks a workflow, its tools and models, and the server."""

STORE = ("plait.store", "plait.driver.runtime", "plait.driver.run_view", "plait.core.state")

FOR_A_PERSON = ("rich", "concurrent.futures")
"""What prints for a person (rich) or verifies on every core (``verify --all``'s process
pool): never loaded to print one JSON object."""

THE_STEP = (
    "plait.core.env",
    "plait.core.plan",
    "plait.core.conditions",
    "plait.core.reducers",
    "plait.core.events",
    "plait.core.machine",
    "plait.core.asks",
)
"""What a step needs beyond the state it decodes: reading a checkpoint needs none of it."""


def imported(tmp_path: Path, *args: str) -> tuple[int, set[str], str]:
    """Exit code, imported modules and stdout of ``plait ARGS`` in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=tmp_path
    )
    report = json.loads(done.stderr.rpartition("\nMODULES ")[2])
    return report["exit"], set(report["modules"]), done.stdout


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A copy of the committed fixture store (finished, parked and governed runs)."""
    copy = tmp_path / "runs.db"
    shutil.copyfile(FIXTURE_DB, copy)
    return f"sqlite:///{copy}"


def absent(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The names (or packages) among ``names`` that were imported after all."""
    return [n for n in names if n in modules]


def test_help_imports_no_verb_and_no_store(tmp_path: Path) -> None:
    code, modules, out = imported(tmp_path, "--help")
    assert code == 0
    assert all(v.name in out for v in VERBS)
    assert absent(modules, DRIVING + LOADING + STORE) == []
    assert not [m for m in modules if m.startswith("plait.cli.") and m not in _CLI_CORE]


_CLI_CORE = {"plait.cli.verbs", "plait.cli.output"}


def test_runs_reads_the_store_and_nothing_that_drives(tmp_path: Path, db: str) -> None:
    code, modules, out = imported(tmp_path, "runs", "--json", "--db", db)
    assert code == 0
    assert len(json.loads(out)["runs"]) > 10
    assert "plait.store" in modules  # the probe sees a verb that did run
    assert absent(modules, DRIVING + LOADING) == []
    the_step = ("plait.core.state", "plait.core.plan", "plait.core.events", "asyncio")
    assert absent(modules, ("plait.driver.run_view", *the_step)) == []


def test_asks_reads_the_parked_runs_and_nothing_that_drives(tmp_path: Path, db: str) -> None:
    code, modules, out = imported(tmp_path, "asks", "--json", "--db", db)
    assert code == 0
    assert json.loads(out)["asks"]
    assert absent(modules, DRIVING + LOADING + ("plait.governance",)) == []


def test_show_reads_a_run_and_nothing_that_drives(tmp_path: Path, db: str) -> None:
    code, modules, out = imported(tmp_path, "show", "orders-chain", "--json", "--db", db)
    assert code == 0
    assert json.loads(out)["status"] == "completed"
    assert absent(modules, DRIVING + LOADING + ("plait.governance",)) == []


@pytest.mark.parametrize(
    "args",
    [("runs", "--json"), ("asks", "--json"), ("show", "orders-chain", "--json")],
    ids=["runs", "asks", "show"],
)
def test_json_output_imports_nothing_a_person_reads(
    tmp_path: Path, db: str, args: tuple[str, ...]
) -> None:
    code, modules, out = imported(tmp_path, *args, "--db", db)
    assert code == 0
    assert json.loads(out)
    assert absent(modules, FOR_A_PERSON) == []


def test_asks_and_show_decode_checkpoints_without_the_step(tmp_path: Path, db: str) -> None:
    """The parked runs' asks and a run's standing come from the state a checkpoint holds:
    the plan, its conditions and reducers, and the step's events are not imported."""
    code, modules, out = imported(tmp_path, "asks", "--json", "--db", db)
    assert code == 0
    assert json.loads(out)["asks"]
    assert "plait.core.state" in modules  # checkpoints were read
    assert absent(modules, (*THE_STEP, "plait.files")) == []
    code, modules, out = imported(tmp_path, "show", "orders-chain", "--json", "--db", db)
    assert code == 0
    assert json.loads(out)["status"] == "completed"
    assert "plait.core.state" in modules
    assert absent(modules, THE_STEP) == []


def test_asks_with_no_parked_run_reads_no_checkpoint(tmp_path: Path) -> None:
    """No run is parked: nothing to decode, so the checkpoint reader is not imported."""
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    code, modules, out = imported(tmp_path, "asks", "--json", "--db", empty)
    assert code == 0
    assert json.loads(out) == {"asks": []}
    assert "plait.store" in modules
    assert absent(modules, ("plait.core.state", "plait.driver.run_view", *FOR_A_PERSON)) == []


def test_show_of_a_governed_run_imports_governance_for_its_explanation(
    tmp_path: Path, db: str
) -> None:
    code, modules, out = imported(tmp_path, "show", "support-governed", "--json", "--db", db)
    assert code in (0, 1, 3)
    assert "run_id" in json.loads(out)
    assert absent(modules, DRIVING) == []


def test_every_verb_summary_is_its_docstring_s_first_paragraph() -> None:
    """``plait --help`` shows ``Verb.summary`` without importing the verb: it must say
    what the verb's own docstring (or sub-app's help) says."""
    group = LazyVerbs(name="plait")
    for verb in VERBS:
        command = load(verb, rich_markup_mode=group.rich_markup_mode)
        assert command.name == verb.name
        assert command.help is not None
        assert inspect.cleandoc(command.help).split("\n\n")[0] == verb.summary, verb.name


def test_a_verb_is_loaded_only_when_named() -> None:
    group = LazyVerbs(name="plait")
    assert list(group.commands) == [v.name for v in VERBS]
    assert all(isinstance(c, Stub) for c in group.commands.values())
    runs = group.loaded("runs")
    assert runs is not None and not isinstance(runs, Stub)
    assert [p.name for p in runs.params] == [
        "status",
        "limit",
        "workflow",
        "since",
        "search",
        "cursor",
        "sort",
        "order",
        "updated_since",
        "db",
        "json_output",
    ]
    assert isinstance(group.commands["show"], Stub)
    assert group.loaded("no-such-verb") is None


def test_the_app_is_the_lazy_group() -> None:
    from typer.main import get_command

    assert isinstance(get_command(app), LazyVerbs)


@pytest.mark.parametrize("package", [plait, plait.workflow])
def test_every_public_name_resolves(package: object) -> None:
    """The package roots import their names on first use; each one is there."""
    for name in package.__all__:  # type: ignore[attr-defined]
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError):
        _ = package.no_such_name  # type: ignore[attr-defined]
