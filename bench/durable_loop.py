"""Durable runs on SQLite: plait next to LangGraph + ``SqliteSaver`` in the same run.

Three measurements, each on fresh temp SQLite files, both sides at the same PRAGMAs
(WAL, ``synchronous=NORMAL``: plait's default ``durability: normal``; LangGraph's
``sqlite3`` connection gets the same PRAGMAs before it is handed to ``SqliteSaver``,
and runs with ``durability="sync"``, i.e. every checkpoint is written before the next
superstep starts):

1. per-superstep cost of a 1000-iteration loop ``step -> step (while i < N) -> done``
   whose body only counts (plait: a sync tool, which runs inline since it is alone in
   its wave, and an ``async def`` tool); warm-up, then the median of
   repeats, each on a fresh file. Beside them the *floor*: the same loop written by hand
   against ``sqlite3`` on plait's schema, doing only what ARCHITECTURE.md §5.2 asks of a
   superstep (``floor_loop_once``): how fast any engine could be here;
2. bytes stored per step when the context grows by 1 KB per step (a new random
   1 KB hex string appended to ``log``: plait reducer ``append``; LangGraph
   ``Annotated[list, operator.add]``), after 100 and after 1000 steps: plait's
   ``stored_bytes(run_id)``, LangGraph's ``checkpoints.checkpoint`` + ``writes.value``
   bytes, and for both the file size after ``PRAGMA wal_checkpoint(TRUNCATE)``;
3. per-step time of that growing loop: the first 100 steps against the last 100.

    .venv/bin/python bench/durable_loop.py [--quick] [--profile]

``--quick`` is a smoke run (fewer repeats, a 300-step growth run); ``--profile``
also runs the plait side of (1) and (2) under cProfile and prints the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import operator
import pstats
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from plait import Runtime, Workflow
from plait.store.wal import BACKSTOP_PAGES

N = 1000
BACKSTOP_LABEL = "langgraph, wal_autockpt"
FLOOR_LABEL = "floor (no engine)"
REPEATS = 7
GROW_STEPS = (100, 1000)
DOC_BYTES = 1024  # one hex string of 1024 characters, from 512 random bytes
PRAGMAS = "journal_mode=WAL, synchronous=NORMAL"

# ---------------------------------------------------------------------------
# plait
# ---------------------------------------------------------------------------


def plait_loop(n: int, *, use_async: bool = False) -> Workflow:
    """``step -> step (i < n) -> done``: n counting supersteps plus the final one."""

    def step(i: int) -> dict[str, Any]:
        return {"i": i + 1}

    async def astep(i: int) -> dict[str, Any]:
        return {"i": i + 1}

    def done() -> dict[str, Any]:
        return {}

    return (
        Workflow.new("loop")
        .node("step", tool=astep if use_async else step)
        .node("done", tool=done)
        .edge("step", "step", when=f"i < {n}", max_cycles=n)
        .edge("step", "done", when=f"i >= {n}")
        .budget(max_supersteps=n + 10)
    )


_CLOCK: list[Callable[[], float]] = [time.perf_counter]
"""What the growing loop's steps are timed with: wall time, or with ``--only growth --cpu``
the process's CPU time (what other work on a shared machine moves least)."""


def plait_grow(n: int, stamps: list[float]) -> Workflow:
    """The same loop whose step appends a fresh random 1 KB hex string to ``log``."""
    rng = random.Random(1)

    clock = _CLOCK[0]

    def grow(i: int) -> dict[str, Any]:
        stamps.append(clock())
        return {"i": i + 1, "log": rng.randbytes(DOC_BYTES // 2).hex()}

    def done() -> dict[str, Any]:
        stamps.append(clock())
        return {}

    return (
        Workflow.new("grow")
        .node("grow", tool=grow)
        .node("done", tool=done)
        .edge("grow", "grow", when=f"i < {n}", max_cycles=n)
        .edge("grow", "done", when=f"i >= {n}")
        .reducer("log", "append")
        .budget(max_supersteps=n + 10)
    )


def run_plait(workflow: Workflow, path: Path) -> tuple[float, int, Runtime, str]:
    """Seconds for one ``run_sync`` on a freshly opened file (opening not timed)."""
    rt = Runtime(f"sqlite:///{path}", principal="bench")
    t0 = time.perf_counter()
    result = rt.run_sync(workflow, {"i": 0})
    elapsed = time.perf_counter() - t0
    assert result.status == "completed", result.status
    return elapsed, result.spent["supersteps"], rt, result.run_id


def plait_loop_once(n: int, use_async: bool) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        elapsed, supersteps, rt, _ = run_plait(
            plait_loop(n, use_async=use_async), tmp / Path("p.db")
        )
        rt.close()
    return elapsed, supersteps


def plait_grow_once(n: int) -> tuple[int, int, list[float]]:
    """(stored_bytes, file bytes after a WAL checkpoint, per-step tool timestamps)."""
    stamps: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.db"
        _, _, rt, run_id = run_plait(plait_grow(n, stamps), path)
        with rt:
            stored = rt.store.stored_bytes(run_id)
        return stored, file_bytes(path), stamps


# ---------------------------------------------------------------------------
# The floor: one superstep's duties written by hand against sqlite3
# ---------------------------------------------------------------------------

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_FLOOR_COLUMNS = (
    "INSERT INTO journal (run_id, seq, item, journal_key, executor, record_kind, superstep,"
    " clock_ms, idempotency_key, journal_bytes, sha256, size, payload)"
)
_FLOOR_ROWS = (
    " (?, ?, 'record', NULL, NULL, 'feed', NULL, NULL, NULL, NULL, NULL, NULL, ?),"
    " (?, ?, 'result', ?, NULL, NULL, NULL, ?, NULL, ?, NULL, NULL, ?),"
    " (?, ?, 'checkpoint', NULL, NULL, NULL, ?, NULL, NULL, NULL, ?, ?, ?),"
    " (?, ?, 'intent', ?, 'step', NULL, ?, ?, ?, NULL, NULL, NULL, ?)"
)
_FLOOR_INSERT = _FLOOR_COLUMNS + " VALUES" + _FLOOR_ROWS
_FLOOR_FENCED = (  # as plait's: run id, last seq and token bound once (?1-?3)
    _FLOOR_COLUMNS + " SELECT * FROM (VALUES"
    " (?1, ?2 + 1, 'record', NULL, NULL, 'feed', NULL, NULL, NULL, NULL, NULL, NULL, ?4),"
    " (?1, ?2 + 2, 'result', ?5, NULL, NULL, NULL, ?6, NULL, ?7, NULL, NULL, ?8),"
    " (?1, ?2 + 3, 'checkpoint', NULL, NULL, NULL, ?9, NULL, NULL, NULL, ?10, ?11, ?12),"
    " (?1, ?2 + 4, 'intent', ?13, 'step', NULL, ?14, ?15, ?16, NULL, NULL, NULL, ?17))"
    " WHERE EXISTS (SELECT 1 FROM leases WHERE run_id = ?1 AND token = ?3 AND host IS NOT NULL)"
)


def floor_loop_once(n: int, fenced: bool = True) -> tuple[float, int]:
    """The same loop with no engine: what §5.2 asks of each superstep, written out by hand.

    On plait's own schema (a file a plait store created, so the same table and indexes)
    and with the rows plait writes (same columns, payload and key texts, a checkpoint of
    the same fields as engine epoch 4's), each superstep: calls the tool and checks its
    result is JSON; merges it and evaluates the loop's edge; takes the checkpoint's
    canonical bytes and SHA-256; derives the next intent's idempotency key; then, in one
    BEGIN IMMEDIATE transaction, reads the lease token and the last seq and inserts the
    wave's feed record, result, checkpoint and next intent. No validation, no budgets, no
    governance, no tracing, no generality: no engine can do less and keep §5.2's
    promises, so this is the bound a ratio against LangGraph can reach on this machine.

    ``fenced`` (the floor since issue #22's third round, as plait's SQLite store commits a
    wave while it holds the lease): the transaction is one autocommitted INSERT whose
    WHERE reads the lease token, at the seqs after the last one it wrote (since the fifth
    round, as plait's, with the run id, that seq and the token bound once); else
    ``BEGIN IMMEDIATE``, a read of the token and the last seq, the INSERT and ``COMMIT``.
    """
    from plait.store import LeaseOwner, RunInfo
    from plait.store.sqlite import SqliteStore

    def step(i: int) -> dict[str, Any]:
        return {"i": i + 1}

    run = "run-0123456789abcdef"  # as long as the run ids plait makes
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.db"
        store = SqliteStore(path)
        store.create_run(RunInfo(run, "loop", "running", "bench", None, 0, 0), {"plan": {}})
        token = store.acquire_lease(run, LeaseOwner("bench", 1, 0), 0, 60_000, lambda _: True)
        store.close()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA synchronous=NORMAL")
        # No checkpoint during the loop at all (plait moves it to a thread): a bound.
        conn.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        encode = _CANONICAL.encode
        # The fields of plait's checkpoint from engine epoch 4, which leaves out those at a
        # plain default (no asks, flows, cancel, failure; no tokens or money spent).
        scheduler: dict[str, Any] = {
            "attempt": [0, 0], "attempt_base": [0, 0], "clock_ms": 0, "context": {"i": 0},
            "edge_fired": [0, 0], "in_res": [{"0": "Fired"}, {"1": "Dead"}],
            "node_gen": [0, 0], "node_state": ["Ready", "Dead"], "phase": "Idle",
            "run_id": run, "superstep": 0,
            "spent": {"storage_bytes": 0, "supersteps": 0, "wall_ms": 0},
        }  # fmt: skip
        usage = {"input_tokens": 0, "output_tokens": 0, "usd_micros": 0}
        t0 = time.perf_counter()
        i, attempt, seq = 0, 1, 0
        while True:
            out = step(i)  # the wave's one effect (its intent went in with the last wave)
            result = encode(out)
            now = int(time.time() * 1000)
            key = encode({"attempt": attempt, "effect_seq": 0, "kind": "tool", "node": "step",
                          "run_id": run, "task_path": ""})  # fmt: skip
            feed = encode({"events": [{"clock": now}, {"resolved": json.loads(key)}]})
            outcome = encode({"Completed": {"result": json.loads(result), "usage": usage}})
            i = out["i"]
            scheduler["context"] = {"i": i}
            scheduler["clock_ms"] = now
            scheduler["superstep"] = attempt
            scheduler["spent"]["supersteps"] = attempt
            scheduler["spent"]["storage_bytes"] += len(result)
            go_on = i < n  # the loop edge's condition
            scheduler["attempt"][0] = scheduler["attempt_base"][0] = attempt
            checkpoint = encode({
                "scheduler": scheduler,
                "decisions": {"clock_close_ms": now, "clock_open_ms": now, "superstep": attempt,
                              "dispatched": [[0, attempt]], "edges": [[0, attempt, "Fired"]]},
            }).encode()  # fmt: skip
            sha = hashlib.sha256(checkpoint).hexdigest()
            next_key = key.replace(f'"attempt":{attempt},', f'"attempt":{attempt + 1},')
            next_input = encode({"i": i})
            idempotency = hashlib.sha256((next_key + next_input).encode()).hexdigest()
            if fenced and attempt > 1:  # the first wave reads the last seq, as plait's does
                inserted = conn.execute(
                    _FLOOR_FENCED,
                    (run, seq, token, '{"j":' + feed + "}",
                     key, now, len(result), '{"j":' + outcome + "}",
                     attempt, sha, len(checkpoint), '{"j":' + checkpoint.decode() + "}",
                     next_key, attempt + 1, now, idempotency, '{"j":' + next_input + "}"),
                ).rowcount  # fmt: skip
                assert inserted == 4  # the lease is held
                seq += 4
                attempt += 1
                if not go_on:
                    break
                continue
            conn.execute("BEGIN IMMEDIATE")
            seq, held = conn.execute(
                "SELECT (SELECT MAX(seq) FROM journal WHERE run_id = ?), token"
                " FROM leases WHERE run_id = ?",
                (run, run),
            ).fetchone()
            assert held == token
            seq = seq or 0
            conn.execute(
                _FLOOR_INSERT,
                (run, seq + 1, '{"j":' + feed + "}",
                 run, seq + 2, key, now, len(result), '{"j":' + outcome + "}",
                 run, seq + 3, attempt, sha, len(checkpoint), '{"j":' + checkpoint.decode() + "}",
                 run, seq + 4, next_key, attempt + 1, now, idempotency,
                 '{"j":' + next_input + "}"),
            )  # fmt: skip
            conn.execute("COMMIT")
            seq += 4
            attempt += 1
            if not go_on:
                break
        elapsed = time.perf_counter() - t0
        conn.close()
    return elapsed, n + 1


# ---------------------------------------------------------------------------
# LangGraph + SqliteSaver
# ---------------------------------------------------------------------------


def langgraph_app(n: int, grow: list[float] | None, conn: sqlite3.Connection) -> Any:
    """The same graph shape: ``step -> step (i < n) | done -> END``."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        i: int
        log: Annotated[list[str], operator.add]

    rng = random.Random(1)

    def step(state: State) -> dict[str, Any]:
        if grow is None:
            return {"i": state["i"] + 1}
        grow.append(time.perf_counter())
        return {"i": state["i"] + 1, "log": [rng.randbytes(DOC_BYTES // 2).hex()]}

    def done(state: State) -> dict[str, Any]:
        if grow is not None:
            grow.append(time.perf_counter())
        return {}

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_node("done", done)
    graph.add_edge(START, "step")
    graph.add_conditional_edges(
        "step", lambda s: "step" if s["i"] < n else "done", ["step", "done"]
    )
    graph.add_edge("done", END)
    saver = SqliteSaver(conn)
    saver.setup()  # create its tables outside the timed region, as plait's Runtime does
    return graph.compile(checkpointer=saver)


def langgraph_conn(path: Path, wal_autocheckpoint: int | None = None) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if wal_autocheckpoint is not None:
        conn.execute(f"PRAGMA wal_autocheckpoint={int(wal_autocheckpoint)}")
    return conn


def run_langgraph(
    n: int, path: Path, grow: list[float] | None, wal_autocheckpoint: int | None = None
) -> tuple[float, sqlite3.Connection]:
    conn = langgraph_conn(path, wal_autocheckpoint)
    app = langgraph_app(n, grow, conn)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": n + 10}
    t0 = time.perf_counter()
    out = app.invoke({"i": 0, "log": []}, config, durability="sync")
    elapsed = time.perf_counter() - t0
    assert out["i"] == n, out["i"]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert (sync, mode) == (1, "wal"), (sync, mode)  # NORMAL, WAL: SqliteSaver kept them
    return elapsed, conn


def langgraph_loop_once(n: int, wal_autocheckpoint: int | None = None) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        elapsed, conn = run_langgraph(n, Path(tmp) / "l.db", None, wal_autocheckpoint)
        conn.close()
    return elapsed, n + 1  # n step supersteps + done, as plait counts them


def langgraph_grow_once(n: int) -> tuple[int, int, list[float]]:
    stamps: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l.db"
        _, conn = run_langgraph(n, path, stamps)
        (ckpt,) = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint)), 0) FROM checkpoints"
        ).fetchone()
        (writes,) = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()
        conn.close()
        return ckpt + writes, file_bytes(path), stamps


def file_bytes(path: Path) -> int:
    """Size of the database file once its WAL is folded in (the WAL file is then empty)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


def per_superstep(runs: dict[str, Callable[[], tuple[float, int]]], repeats: int) -> dict[str, Any]:
    """Warm each side up once, then interleave the repeats; median seconds per superstep."""
    for fn in runs.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            elapsed, supersteps = fn()
            samples[name].append(elapsed / supersteps)
    return {name: (statistics.median(s), min(s), max(s), s) for name, s in samples.items()}


def paired_ratio(theirs: list[float], ours: list[float]) -> float:
    """Median of the per-repeat ratios: both sides of a repeat ran back to back."""
    return statistics.median(t / o for t, o in zip(theirs, ours, strict=True))


def window_us(stamps: list[float], start: int, count: int = 100) -> float:
    """Mean µs per step over steps start+1 .. start+count (stamp k is taken as step k+1 begins)."""
    return (stamps[start + count] - stamps[start]) / count * 1e6


def growth(steps: tuple[int, int]) -> dict[str, dict[str, Any]]:
    small, big = steps
    plait_grow_once(20)  # warm-up
    langgraph_grow_once(20)
    out = {}
    for name, fn in (("plait", plait_grow_once), ("langgraph", langgraph_grow_once)):
        s_stored, s_file, _ = fn(small)
        b_stored, b_file, stamps = fn(big)
        out[name] = {
            "stored": (s_stored, b_stored),
            "file": (s_file, b_file),
            "first_us": window_us(stamps, 0),
            "last_us": window_us(stamps, big - 100),
        }
    return out


def growth_only(steps: int, rounds: int) -> dict[str, float]:
    """Only plait's growing loop: the first and the last 100 steps, and the slopes (steps
    100..200 against the last 100), one line per run (issue #22 target 2)."""
    plait_grow_once(20)  # warm-up
    clock = "CPU" if _CLOCK[0] is time.process_time else "wall"
    print(f"plait growing loop, {DOC_BYTES} B/step, {steps} steps, {clock} time, one run a line:")
    summary: dict[str, float] = {}
    for r in range(rounds):
        _, _, stamps = plait_grow_once(steps)
        first, second = window_us(stamps, 0), window_us(stamps, 100)
        last = window_us(stamps, steps - 100)
        print(
            f"  run {r + 1}: first 100 {first:8.1f} us/step, steps 100-200 {second:8.1f},"
            f" last 100 {last:8.1f}; last/first {last / first:5.2f}x,"
            f" last/(100-200) {last / second:5.2f}x"
        )
        summary = {"first_us": first, "second_us": second, "last_us": last}
    return summary


def profile(n: int, grow_steps: int, top: int = 10) -> None:
    """cProfile the plait side of the loop and of the growing loop; top functions."""
    cases = (
        (f"plait loop, {n} iterations, sync tool", lambda k: plait_loop_once(k, False), n),
        (f"plait growing context, {grow_steps} steps", plait_grow_once, grow_steps),
    )
    for label, fn, steps in cases:
        fn(min(steps, 100))  # warm-up
        prof = cProfile.Profile()
        prof.runcall(fn, steps)
        stats = pstats.Stats(prof)
        table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
        print(f"\nprofile: {label} ({stats.total_tt:.2f} s under cProfile)")  # type: ignore[attr-defined]
        for col, title in ((3, "cumulative"), (2, "own")):
            print(f"  top {top} by {title} time:")
            print(f"  {'ncalls':>8} {'own s':>7} {'cum s':>7}  function")
            rows = sorted(table.items(), key=lambda kv: kv[1][col], reverse=True)
            shown = 0
            for (file, line, func), (_, ncalls, tt, ct, _) in rows:
                if col == 3 and not _interesting(file, func):
                    continue
                print(f"  {ncalls:>8} {tt:7.2f} {ct:7.2f}  {_where(file, line, func)}")
                shown += 1
                if shown == top:
                    break


_WRAPPERS = ("run_sync", "start", "_drive", "<lambda>")


def _interesting(file: str, func: str) -> bool:
    """Skip the frames every call passes through (asyncio loop, run_sync wrappers, this file)."""
    if file.startswith("~") or func in _WRAPPERS:
        return False
    return not any(b in file for b in ("asyncio", "durable_loop.py", "tempfile", "cProfile"))


def _where(file: str, line: int, func: str) -> str:
    if file == "~":
        return func
    parts = Path(file).parts
    short = "/".join(parts[parts.index("plait") :]) if "plait" in parts else "/".join(parts[-2:])
    return f"{short}:{line}({func})"


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 2 repeats, 300-step growth"
    )
    parser.add_argument("--profile", action="store_true", help="also cProfile the plait side")
    parser.add_argument(
        "--only",
        choices=("growth",),
        help="growth: only plait's growing loop (3.), its time per step over the run",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="with --only growth: runs, each reported"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="with --only growth: time steps in CPU time"
    )
    args = parser.parse_args(argv)
    if args.cpu:
        _CLOCK[0] = time.process_time
    if args.only == "growth":
        return growth_only(GROW_STEPS[1] if not args.quick else 300, args.rounds)
    repeats = 2 if args.quick else REPEATS
    steps = (100, 300) if args.quick else GROW_STEPS

    print(
        f"durable loop on SQLite ({PRAGMAS} on both sides; sqlite {sqlite3.sqlite_version};"
        f" LangGraph SqliteSaver, durability='sync'):"
    )
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401

        have_langgraph = True
    except ImportError:
        print("  langgraph-checkpoint-sqlite is not installed: `make bench` installs it")
        have_langgraph = False

    runs: dict[str, Callable[[], tuple[float, int]]] = {
        "plait (sync tool)": lambda: plait_loop_once(N, False),
        "plait (async tool)": lambda: plait_loop_once(N, True),
        FLOOR_LABEL: lambda: floor_loop_once(N),
    }
    if have_langgraph:
        runs["langgraph + SqliteSaver"] = lambda: langgraph_loop_once(N)
        # plait checkpoints the WAL from a thread of its own and keeps SQLite's automatic
        # checkpoint only as a backstop at BACKSTOP_PAGES (store/wal.py); LangGraph given
        # that same backstop shows how much of the ratio is where the checkpoint runs.
        runs[BACKSTOP_LABEL] = lambda: langgraph_loop_once(N, BACKSTOP_PAGES)
    res = per_superstep(runs, repeats)
    print(
        f"  1. loop of {N} iterations ({N + 1} supersteps), fresh file per run,"
        f" median of {repeats} after warm-up:"
    )
    for name, (med, lo, hi, _) in res.items():
        print(
            f"     {name:<24} {med * 1e6:8.1f} us/superstep"
            f"  (min {lo * 1e6:.1f}, max {hi * 1e6:.1f})  {1 / med:7.0f} supersteps/s"
        )
    ours, ours_async = res["plait (sync tool)"][0], res["plait (async tool)"][0]
    theirs = res["langgraph + SqliteSaver"][0] if have_langgraph else float("nan")
    print(
        f"     ratio LangGraph/plait of the medians: {theirs / ours:.2f}x (sync tool),"
        f" {theirs / ours_async:.2f}x (async tool)  (>1: plait is faster)"
    )
    if have_langgraph:
        lg = res["langgraph + SqliteSaver"][3]
        print(
            "     median of per-repeat ratios:"
            f" {paired_ratio(lg, res['plait (sync tool)'][3]):.2f}x (sync tool),"
            f" {paired_ratio(lg, res['plait (async tool)'][3]):.2f}x (async tool);"
            f" LangGraph at wal_autocheckpoint={BACKSTOP_PAGES}:"
            f" {paired_ratio(res[BACKSTOP_LABEL][3], res['plait (sync tool)'][3]):.2f}x"
            " (sync tool)"
        )
    floor = res[FLOOR_LABEL][0]
    print(
        f"     the floor: plait takes {ours / floor:.2f}x its time (the engine's own cost);"
        f" LangGraph {theirs / floor:.2f}x, so no engine on this schema could be more than"
        f" {theirs / floor:.1f}x faster than LangGraph here"
    )
    summary = {
        "floor_us": floor * 1e6,
        "plait_us": ours * 1e6,
        "plait_async_us": ours_async * 1e6,
        "langgraph_us": theirs * 1e6,
        "ratio": theirs / ours,
    }
    if not have_langgraph:
        return summary

    small, big = steps
    g = growth(steps)
    print(
        f"  2. context growing {DOC_BYTES} B/step (random hex appended to a list), one run"
        f" per size, after warm-up:"
    )
    head = (
        f"     {'':<10} {'bytes':<6} {'B' + str(small):>12} {'B' + str(big):>12}"
        f" {f'B{small}/{small}':>10} {f'(B{big}-B{small})/{big - small}':>16} {'flatness':>9}"
    )
    print(head)
    for name, row in g.items():
        for kind, label in (("stored", "logical"), ("file", "file")):
            b_small, b_big = row[kind]
            first, later = b_small / small, (b_big - b_small) / (big - small)
            print(
                f"     {name:<10} {label:<6} {b_small:>12,} {b_big:>12,}"
                f" {first:>10,.0f} {later:>16,.0f} {later / first:>8.2f}x"
            )
    print(
        "     logical: plait stored_bytes(run_id) (journal + manifests + content-addressed"
        " nodes); langgraph sum(length(checkpoints.checkpoint)) + sum(length(writes.value))."
    )
    print("     file: database file size after PRAGMA wal_checkpoint(TRUNCATE).")
    print(f"  3. per-step time of the growing loop ({big} steps, mean over each window):")
    for name, row in g.items():
        print(
            f"     {name:<10} first 100 steps {row['first_us']:9.1f} us/step,"
            f" last 100 {row['last_us']:9.1f} us/step,"
            f" growth {row['last_us'] / row['first_us']:5.1f}x"
        )
    for name, row in g.items():
        b_small, b_big = row["stored"]
        summary[f"{name}_bytes_per_step_first"] = b_small / small
        summary[f"{name}_bytes_per_step_later"] = (b_big - b_small) / (big - small)
        summary[f"{name}_grow_first_us"] = row["first_us"]
        summary[f"{name}_grow_last_us"] = row["last_us"]

    if args.profile:
        profile(N, big)
    return summary


if __name__ == "__main__":
    main()
