"""Conformance scenarios of the LLM loop (docs/architecture.md §6, §14), run through the CLI.

Every folder next to this file is one scenario, named after the behaviour it pins:

- ``workflow.yaml``: the workflow (its abstract node uses ``scripted:answers.json``);
- ``answers.json``: the scripted model (CONTRACT.md, "Scripted models");
- ``tools.py``: the Python tools the workflow names (``tools:<function>``);
- ``expected.json``: what the run must produce, with these keys (all but ``spec`` optional):

  ``spec``             one sentence: the rule the scenario pins (shown on failure);
  ``input``            the run's ``--input`` value;
  ``exit_code``        of ``plait run`` (default 0 for completed, 1 otherwise);
  ``status``           the run's status;
  ``outcome``          a pattern for the ``outcome`` object;
  ``context``          the final context, exactly;
  ``context_includes`` a pattern for the final context (extra keys allowed);
  ``usage``            a pattern for ``spent`` (e.g. summed tokens);
  ``folds``            the run's fold count;
  ``trace``            every trace entry as ``[node, kind, effect_seq, status]``, exactly;
  ``entries``          ``[{"at": [node, kind, effect_seq], "match": pattern}]`` for single
                       trace entries (their ``input``, ``result``, ``failure``, ``usage``);
  ``events``           the lines the tools appended to ``$SCENARIO_EVENTS``, in order
                       (which tool ran, how often, in which completion order);
  ``events_in_any_order`` the same, for tools that run concurrently on threads;
  ``same_as_with_env`` environment variables for a second run that must journal the very
                       same checkpoints (byte for byte) and trace (e.g. another completion
                       order of a parallel tool round).

A pattern matches a value when: an object pattern's every key matches (other keys are
allowed); a list pattern has as many items, each matching; a scalar is equal (with
``1`` and ``1.0`` and ``true`` told apart); ``{"$startswith": s}`` / ``{"$contains": s}``
match strings; ``{"$any": true}`` matches anything; ``{"$var": "name"}`` binds ``name``
to the first value it meets and matches only that value afterwards (tool-call ids:
each tool entry answers the call it belongs to).

Each scenario is copied to a temporary folder and run there with a pinned clock and a
fixed run id; after the run, ``answers.json`` is emptied (``[]``: any model call would
fail) and ``plait verify`` must still pass without running any tool (verify never calls
a model or a tool).
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

from inprocess import run_plait

HERE = Path(__file__).parent
PLAIT = str(Path(sys.executable).parent / "plait")
NOW_MS = "1767225600000"
SCENARIOS = sorted(p.name for p in HERE.iterdir() if (p / "expected.json").is_file())
EXPECTED_KEYS = {
    "spec",
    "input",
    "exit_code",
    "status",
    "outcome",
    "context",
    "context_includes",
    "usage",
    "folds",
    "trace",
    "entries",
    "events",
    "events_in_any_order",
    "same_as_with_env",
}


# --- patterns -------------------------------------------------------------------------


def _same_scalar(expected: Any, actual: Any) -> bool:
    return type(expected) is type(actual) and expected == actual


def match(pattern: Any, value: Any, where: str, bound: dict[str, Any]) -> list[str]:
    """Every way ``value`` fails ``pattern`` (empty: it matches), with its path."""
    if isinstance(pattern, dict) and len(pattern) == 1 and next(iter(pattern)).startswith("$"):
        ((op, arg),) = pattern.items()
        if op == "$any":
            return []
        if op == "$var":
            if arg not in bound:
                bound[arg] = value
                return []
            return [] if bound[arg] == value else [f"{where}: {value!r} != ${arg} {bound[arg]!r}"]
        if op in ("$startswith", "$contains"):
            ok = isinstance(value, str) and (
                value.startswith(arg) if op == "$startswith" else arg in value
            )
            return [] if ok else [f"{where}: {value!r} does not satisfy {op} {arg!r}"]
        raise AssertionError(f"{where}: unknown pattern operator {op}")
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {value!r}"]
        problems = []
        for key in pattern:
            if key not in value:
                problems.append(f"{where}.{key}: missing (have {sorted(value)})")
            else:
                problems += match(pattern[key], value[key], f"{where}.{key}", bound)
        return problems
    if isinstance(pattern, list):
        if not isinstance(value, list) or len(value) != len(pattern):
            return [f"{where}: expected {len(pattern)} items, got {value!r}"]
        problems = []
        for i, (p, v) in enumerate(zip(pattern, value, strict=True)):
            problems += match(p, v, f"{where}[{i}]", bound)
        return problems
    return [] if _same_scalar(pattern, value) else [f"{where}: expected {pattern!r}, got {value!r}"]


def assert_matches(pattern: Any, value: Any, where: str, bound: dict[str, Any]) -> None:
    problems = match(pattern, value, where, bound)
    assert not problems, "\n".join(problems) + f"\n--- actual {where}:\n{_pretty(value)}"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def test_the_pattern_language_means_what_the_docstring_says():
    bound: dict[str, Any] = {}
    assert match({"a": 1}, {"a": 1, "b": 2}, "$", bound) == []
    assert match({"a": 1}, {"a": 1.0}, "$", bound) != []
    assert match([1], [1, 2], "$", bound) != []
    assert match({"$startswith": "PLAIT-E024"}, "PLAIT-E024 context", "$", bound) == []
    assert match([{"$var": "id"}, {"$var": "id"}], ["x", "y"], "$", bound) != []
    assert match([{"$var": "k"}, {"$var": "k"}], ["x", "x"], "$", {}) == []


# --- running ----------------------------------------------------------------------------


def plait(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (tests/inprocess.py): the same verbs on the same file."""
    return run_plait([PLAIT, *args], cwd=cwd, env=env)


def run_scenario(
    name: str, folder: Path, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Copy scenario ``name`` to ``folder``, run it; returns output, trace, checkpoints."""
    shutil.copytree(HERE / name, folder)
    expected = json.loads((folder / "expected.json").read_text())
    events = folder / "events.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    env |= {"PLAIT_NOW_MS": NOW_MS, "SCENARIO_EVENTS": str(events), **(extra_env or {})}
    db = f"sqlite:///{folder}/plait.db"
    args = ["run", "workflow.yaml", "--db", db, "--run-id", name, "--json"]
    if "input" in expected:
        args += ["--input", json.dumps(expected["input"])]
    ran = plait(folder, *args, env=env)
    assert ran.stdout, f"plait run printed nothing; stderr:\n{ran.stderr}"
    output = json.loads(ran.stdout)
    traced = plait(folder, "trace", name, "--db", db, "--json", env=env)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    entries = json.loads(traced.stdout)["entries"]
    ran_tools = events.read_text().splitlines() if events.exists() else []
    # Verify never calls the model: with every response gone, any model call would fail.
    # (Deleting the file instead is refused by the workflow loader, PLAIT-E004: see
    # tests/agentloop/test_agent_crash.py.)
    (folder / "answers.json").write_text("[]")
    verified = plait(folder, "verify", name, "--db", db, "--json", env=env)
    after = events.read_text().splitlines() if events.exists() else []
    assert after == ran_tools, "verify ran a tool"
    return {
        "exit": ran.returncode,
        "stderr": ran.stderr,
        "output": output,
        "entries": entries,
        "events": ran_tools,
        "verify": (verified.returncode, verified.stdout + verified.stderr),
        "checkpoints": checkpoints(folder / "plait.db"),
    }


def checkpoints(db: Path) -> list[bytes]:
    """Every checkpoint the run journaled, as stored, in order."""
    from plait.store import open_store

    store = open_store(f"sqlite:///{db}")
    try:
        (run,) = store.list_runs()
        journal = store.load_journal(run.run_id)
        return [store.read_checkpoint(run.run_id, m.seq) for m in journal.checkpoints]
    finally:
        store.close()


def _at(entries: list[dict[str, Any]], node: str, kind: str, seq: int) -> dict[str, Any]:
    found = [e for e in entries if (e["node"], e["kind"], e["effect_seq"]) == (node, kind, seq)]
    assert len(found) == 1, f"no single trace entry {node}/{kind}/{seq}"
    return found[0]


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(name: str, tmp_path: Path) -> None:
    expected = json.loads((HERE / name / "expected.json").read_text())
    assert set(expected) <= EXPECTED_KEYS, f"unknown keys {set(expected) - EXPECTED_KEYS}"
    assert expected.get("spec"), "a scenario states the rule it pins"
    got = run_scenario(name, tmp_path / name)
    output, entries = got["output"], got["entries"]
    bound: dict[str, Any] = {}
    note = f"[{name}] {expected['spec']}\nstderr: {got['stderr']}"

    status = expected.get("status", "completed")
    assert output.get("status") == status, f"{note}\n{_pretty(output)}"
    assert got["exit"] == expected.get("exit_code", 0 if status == "completed" else 1), note
    if "outcome" in expected:
        assert_matches(expected["outcome"], output["outcome"], "outcome", bound)
    if "context" in expected:
        assert output["context"] == expected["context"], f"{note}\n{_pretty(output['context'])}"
    if "context_includes" in expected:
        assert_matches(expected["context_includes"], output["context"], "context", bound)
    if "usage" in expected:
        assert_matches(expected["usage"], output["spent"], "spent", bound)
    if "folds" in expected:
        assert output["folds"] == expected["folds"], note

    if "trace" in expected:
        shape = [[e["node"], e["kind"], e["effect_seq"], e["status"]] for e in entries]
        assert shape == expected["trace"], f"{note}\ntrace was {shape}"
    for item in expected.get("entries", []):
        node, kind, seq = item["at"]
        entry = _at(entries, node, kind, seq)
        assert_matches(item["match"], entry, f"trace[{node}/{kind}/{seq}]", bound)
    if "events" in expected:
        assert got["events"] == expected["events"], f"{note}\ntools ran: {got['events']}"
    if "events_in_any_order" in expected:
        ran = sorted(got["events"])
        assert ran == sorted(expected["events_in_any_order"]), f"{note}\ntools ran: {ran}"

    code, report = got["verify"]
    assert code == 0, f"{note}\nverify: {report}"
    verified = json.loads(report)
    assert verified["verified"] is True and verified["up_to"] == "terminal", report

    if "same_as_with_env" in expected:
        again = run_scenario(name, tmp_path / "again", expected["same_as_with_env"])
        assert again["events"] != got["events"], "the variant must change what the tools did"
        assert again["entries"] == entries, note
        assert again["checkpoints"] == got["checkpoints"], note
        assert again["output"] == output, note


def test_every_scenario_folder_is_complete():
    folders = sorted(p for p in HERE.iterdir() if p.is_dir() and not p.name.startswith("__"))
    assert [p.name for p in folders] == SCENARIOS
    for folder in folders:
        for part in ("workflow.yaml", "answers.json", "tools.py", "expected.json"):
            assert (folder / part).is_file(), f"{folder.name} lacks {part}"
    assert len(SCENARIOS) >= 12
