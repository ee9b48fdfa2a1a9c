"""Runs are the same bytes in every process: hash seeds never reach a checkpoint (§1, §5.5).

String hashing is randomized per process (``PYTHONHASHSEED``), so a set of strings
iterates in a different order in the process that ran a workflow and the one that
verifies it. Each workflow here (the examples, contract flows, and a wide one mixing
parallel nodes, Send fan-out with reducers, a governed loop with parallel, refused and
invalid calls, and approvals answered in different orders) runs in real ``plait``
processes under two hash seeds at a fixed clock; the two checkpoint chains must be
byte-identical, and ``plait verify`` under a third seed must agree with both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contract.support import FLOWS, plait_process
from plait.store import open_store

EXAMPLES = Path(__file__).parents[2] / "examples"
SEEDS = ("0", "12345")
VERIFY_SEED = "271828"

WIDE = """
name: wide
nodes:
  - {id: seed, tool: seed}
  - {id: left, tool: tag}
  - {id: right, tool: tag}
  - {id: worker, tool: work, retries: 1}
  - id: agent
    instruction: Use the tools, several at once.
    tools: [probe, strict_probe, forbidden]
    flow: {steps: [{id: s, allow: [probe, strict_probe], done: {is_true: never_set}}]}
  - {id: join, tool: tag}
edges:
  - {from: seed, to: left}
  - {from: seed, to: right}
  - {from: seed, to: worker}
  - {from: seed, to: agent}
  - {from: left, to: join}
  - {from: right, to: join}
  - {from: worker, to: join}
  - {from: agent, to: join}
reducers: {log: append, bag: merge, items: extend, total: sum, names: append}
tools:
  seed: {python: "wide_tools:seed"}
  tag: {python: "wide_tools:tag"}
  work: {python: "wide_tools:work"}
  probe: {python: "wide_tools:probe"}
  forbidden: {python: "wide_tools:probe"}
  strict_probe:
    command: ["python3", "-c", "import json, sys; print(json.dumps(json.load(sys.stdin)))"]
    input_schema:
      type: object
      required: [a]
      additionalProperties: false
      properties: {a: {type: integer}, opts: {type: array}}
llm: {model: "scripted:wide_answers.json"}
"""

WIDE_TOOLS = """
NAMES = {"zeta", "alpha", "mu", "beta", "omega", "kappa", "eta", "pi"}


def seed() -> dict:
    send = [{"node": "worker", "input": {"x": i, "name": n}} for i, n in enumerate(sorted(NAMES))]
    return {"log": "seed", "names": sorted(NAMES), "$send": send}


def tag(context: dict) -> dict:
    return {"log": "tag", "bag": {k: True for k in context.get("names", [])}}


def work(x: int, name: str) -> dict:
    return {"items": [x, name], "total": x, "bag": {name: x}, "log": f"w{x}"}


def probe(q: str) -> dict:
    return {"probed": q, "bag": {"p" + q: 1}}
"""


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


WIDE_ANSWERS = [
    # A parallel round: admitted calls, a refused one, and arguments the schema refuses
    # with two problems at once (which one the model reads must not depend on key order).
    {"tool_calls": [call("probe", q="a"), call("forbidden", q="b"), call("probe", q="c")]},
    {"tool_calls": [call("strict_probe", zz=1, b=2)]},
    {"tool_calls": [call("strict_probe", a=1, opts={"z": 1, "b": 2})]},
    {"tool_calls": [call("probe", q="d"), call("strict_probe", a=2)]},
    {"text": json.dumps({"answer": {"z": 1, "a": 2}})},
]

APPROVALS = """
name: approvals
nodes:
  - id: agent
    instruction: Pay them all.
    tools: [pay, note]
tools:
  pay: {python: "wide_tools:pay", approval: true}
  note: {python: "wide_tools:note"}
llm: {model: "scripted:approval_answers.json"}
"""

APPROVAL_TOOLS = """

def pay(who: str, cents: int) -> dict:
    return {"paid": {who: cents}}


def note(text: str) -> dict:
    return {"noted": text}
"""

APPROVAL_ANSWERS = [
    {
        "tool_calls": [
            call("pay", who="ann", cents=5),
            call("note", text="x"),
            call("pay", who="bob", cents=7),
            call("pay", who="cy", cents=9),
        ]
    },
    {"text": "done"},
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The examples, the contract flows and the wide workflows, side by side."""
    ignore = shutil.ignore_patterns("__pycache__", ".plait")
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=ignore)
    shutil.copytree(FLOWS, tmp_path / "flows", ignore=ignore)
    (tmp_path / "wide.yaml").write_text(WIDE)
    (tmp_path / "approvals.yaml").write_text(APPROVALS)
    (tmp_path / "wide_tools.py").write_text(WIDE_TOOLS + APPROVAL_TOOLS)
    (tmp_path / "wide_answers.json").write_text(json.dumps(WIDE_ANSWERS))
    (tmp_path / "approval_answers.json").write_text(json.dumps(APPROVAL_ANSWERS))
    return tmp_path


def plait(folder: Path, seed: str, *args: str) -> dict[str, object]:
    done = plait_process(*args, "--json", cwd=folder, env={"PYTHONHASHSEED": seed})
    assert done.stdout, done
    value = json.loads(done.stdout)
    assert "error" not in value, done
    return dict(value)


def chain(db: Path, run_id: str) -> list[bytes]:
    """Every checkpoint of the run, in order, as its exact stored bytes."""
    store = open_store(f"sqlite:///{db}")
    try:
        return [
            store.read_checkpoint(run_id, c.seq) for c in store.load_journal(run_id).checkpoints
        ]
    finally:
        store.close()


def agree(folder: Path, dbs: list[Path], run_id: str) -> None:
    """Identical chains in both stores, and verify (under a third seed) agrees."""
    first, second = chain(dbs[0], run_id), chain(dbs[1], run_id)
    assert first, "no checkpoint written"
    assert first == second
    for db in dbs:
        report = plait(folder, VERIFY_SEED, "verify", run_id, "--db", f"sqlite:///{db}")
        assert report["verified"] is True, report
        assert report["checkpoints"] == len(first)


@pytest.mark.parametrize(
    ("workflow", "extra"),
    [
        ("examples/orders/workflow.yaml", []),
        ("examples/support/workflow.yaml", []),
        ("examples/support/workflow.yaml", ["--model", "scripted:answers_misbehaving.json"]),
        ("flows/agent.yaml", []),
        ("flows/loop.yaml", []),
        ("flows/outcomes.yaml", ["--input", '{"route": "fail"}']),
        ("wide.yaml", []),
    ],
)
def test_a_run_under_two_hash_seeds_writes_the_same_checkpoints_and_verifies(
    folder: Path, workflow: str, extra: list[str]
) -> None:
    dbs = []
    for seed in SEEDS:
        db = folder / f"seed-{seed}.db"
        url = f"sqlite:///{db}"
        plait(folder, seed, "run", workflow, "--run-id", "r", "--db", url, *extra)
        dbs.append(db)
    agree(folder, dbs, "r")


def test_approvals_answered_in_different_orders_under_different_seeds_agree(
    folder: Path,
) -> None:
    """Three approval-required calls of one model answer, approved in opposite orders
    (each command its own process and hash seed): the resumed runs are the same bytes."""
    dbs = []
    for n, (seed, order) in enumerate(zip(SEEDS, ([0, 1, 2], [2, 1, 0]), strict=True)):
        db = folder / f"approvals-{seed}.db"
        url = f"sqlite:///{db}"
        parked = plait(folder, seed, "run", "approvals.yaml", "--run-id", "r", "--db", url)
        assert parked["status"] == "parked"
        asks = sorted(parked["asks"], key=lambda a: a["input"]["who"])  # type: ignore[index]
        for i in order:
            ask_id = asks[i]["ask_id"]
            plait(folder, f"{seed}{i}", "approve", "r", ask_id, "--as", "bob", "--db", url)
        done = plait(folder, str(n + 7), "resume", "r", "--db", url)
        assert done["status"] == "completed"
        dbs.append(db)
    agree(folder, dbs, "r")
