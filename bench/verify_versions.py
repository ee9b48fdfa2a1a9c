"""What ``plait verify --all --workflow NEW`` costs next to ``plait verify --all`` (issue #16).

Records N runs (default 1,000) of a small multi-superstep workflow file
(``load -> count`` looping five times ``-> finish``: 7 supersteps, 7 tool effects) with one
``Runtime`` on a fresh SQLite file in a temp dir, then times, in the same process and run:

- ``pinned``: every run verified against the version it pinned (``plait verify --all``);
- ``identical``: against a cosmetic new version (a description and comments added), which
  replays every run identically (``verify --all --workflow NEW``);
- ``diverged``: against a version whose loop stops one round earlier, so every run
  diverges at its fifth superstep (the replay stops there);
- ``added``: against a version with an added node and edge no run reaches (an audit
  after a branch never taken), which replays every run identically through the reshape
  of each stored checkpoint into the new plan's shape.

Each is measured through the Python API the CLI calls (``plait.driver.verbs.verify_report``
for each id of ``store.list_runs()``, the new version loaded once with ``load_workflow`` and
``definition_of``, as ``plait verify`` does): one warm-up pass, then the median of
``--repeats`` passes. Prints one JSON line per side, then a markdown table with runs per
second and the ratio to ``pinned``.

    .venv/bin/python bench/verify_versions.py [--n 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plait import Runtime
from plait.driver.verbs import verify_report
from plait.workflow import load_workflow
from plait.workflow.run_definition import RunDefinition, definition_of

WORKFLOW = """\
name: verify-bench
nodes:
  - id: load
    tool: load
  - id: count
    tool: count
  - id: finish
    tool: finish
edges:
  - {from: load, to: count}
  - {from: count, to: count, when: 'i < 5', max_cycles: 10}
  - {from: count, to: finish, when: 'i >= 5'}
reducers: {log: append}
tools:
  load: {python: "bench_tools:load"}
  count: {python: "bench_tools:count"}
  finish: {python: "bench_tools:finish"}
"""

COSMETIC = WORKFLOW.replace(
    "name: verify-bench\n",
    "# the same plan, told otherwise\nname: verify-bench\ndescription: Count to five.\n",
)
DIVERGING = WORKFLOW.replace("'i < 5'", "'i < 4'").replace("'i >= 5'", "'i >= 4'")
ADDED = WORKFLOW.replace(
    "  - id: finish\n    tool: finish\n",
    "  - id: finish\n    tool: finish\n  - id: audit\n    tool: finish\n",
).replace(
    "  - {from: count, to: finish, when: 'i >= 5'}\n",
    "  - {from: count, to: finish, when: 'i >= 5'}\n  - {from: load, to: audit, when: 'i > 99'}\n",
)

TOOLS = """\
def load(order: int = 0) -> dict:
    return {"i": 0, "order": order, "log": "loaded"}


def count(i: int) -> dict:
    return {"i": i + 1, "log": f"counted {i + 1}"}


def finish(i: int) -> dict:
    return {"done": i, "log": "finished"}
"""


async def record(rt: Runtime, path: Path, n: int) -> None:
    workflow = load_workflow(path)
    for k in range(n):
        done = await rt.start(workflow, {"order": k}, run_id=f"run-{k:06d}")
        assert done.status == "completed", (done.run_id, done.status, done.outcome)


def verify_all(rt: Runtime, against: RunDefinition | None) -> list[dict[str, Any]]:
    """What ``plait verify --all [--workflow NEW] --json`` computes, without printing it."""
    return [verify_report(rt, r.run_id, against) for r in rt.store.list_runs()]


def timed(repeats: int, once: Callable[[], list[dict[str, Any]]]) -> tuple[float, list[Any]]:
    """The median seconds of ``repeats`` passes after a warm-up, and the last pass's reports."""
    reports = once()
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        reports = once()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds), reports


def bench(n: int, repeats: int, folder: Path) -> list[dict[str, Any]]:
    (folder / "bench_tools.py").write_text(TOOLS)
    files = {"pinned": folder / "workflow.yaml"}
    files["pinned"].write_text(WORKFLOW)
    for name, text in (("identical", COSMETIC), ("diverged", DIVERGING), ("added", ADDED)):
        files[name] = folder / f"{name}.yaml"
        files[name].write_text(text)
    rows: list[dict[str, Any]] = []
    with Runtime(f"sqlite:///{folder / 'runs.db'}", principal="bench") as rt:
        asyncio.run(record(rt, files["pinned"], n))
        for side in ("pinned", "identical", "diverged", "added"):

            def once(side: str = side) -> list[dict[str, Any]]:
                # A new version is loaded once per pass, as one `plait verify` call does.
                against = None if side == "pinned" else definition_of(load_workflow(files[side]))
                return verify_all(rt, against)

            seconds, reports = timed(repeats, once)
            verified = sum(1 for r in reports if r["verified"])
            checkpoints = sum(r["checkpoints"] for r in reports)
            where = {json.dumps(r.get("diverged_at", {}).get("superstep")) for r in reports}
            rows.append(
                {
                    "side": side,
                    "runs": len(reports),
                    "verified": verified,
                    "checkpoints_compared": checkpoints,
                    "diverged_at_superstep": sorted(where),
                    "seconds": seconds,
                    "runs_per_s": len(reports) / seconds,
                }
            )
    expected = {"pinned": n, "identical": n, "diverged": 0, "added": n}
    for row in rows:
        assert row["runs"] == n and row["verified"] == expected[row["side"]], row
        row["ratio_to_pinned"] = rows[0]["seconds"] / row["seconds"]
    return rows


def report(rows: list[dict[str, Any]], repeats: int) -> None:
    for row in rows:
        print(json.dumps({"bench": "verify_versions", **row}))
    print()
    print(
        f"verify --all over {rows[0]['runs']:,} runs (median of {repeats}), through verify_report"
    )
    print()
    print("| verify | runs/s | ms per run | checkpoints compared | runs/s vs pinned |")
    print("| --- | ---: | ---: | ---: | ---: |")
    labels = {
        "pinned": "`--all` (the version each run pinned)",
        "identical": "`--all --workflow` cosmetic version (identical)",
        "diverged": "`--all --workflow` changed loop (diverges at superstep 5)",
        "added": "`--all --workflow` an added node no run reaches (identical, reshaped)",
    }
    for row in rows:
        print(
            f"| {labels[row['side']]} | {row['runs_per_s']:,.0f} |"
            f" {row['seconds'] * 1000 / row['runs']:.2f} | {row['checkpoints_compared']:,} |"
            f" {row['ratio_to_pinned']:.2f}× |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000, help="runs to record (default 1,000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes (default 5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="plait-verify-") as tmp:
        report(bench(args.n, args.repeats, Path(tmp)), args.repeats)


if __name__ == "__main__":
    main()
