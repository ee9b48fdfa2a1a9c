"""Workers on PostgreSQL: plait next to DBOS and LangGraph + PostgresSaver, same server and run.

Two measurements, every side on its own fresh database of the same PostgreSQL server:

1. **Runs per second** of a three-step run (``first -> second -> third``, each step a
   trivial Python function) with 1 and 2 worker processes, ``--concurrency`` runs in
   flight per process:

   - plait: N runs queued first (``Runtime.enqueue``, as ``plait run --detach``), then
     ``Worker(once=True)`` (what ``plait worker --once`` runs) in each process: claims
     with ``FOR UPDATE SKIP LOCKED``, leases, one fenced commit per wave, 5 commits a run;
   - DBOS: N workflows of three ``@DBOS.step``s enqueued first (``DBOSClient``), then
     each process launches DBOS and serves the queue (``worker_concurrency`` =
     concurrency, ``polling_interval_sec`` = 0.01 s: DBOS queues poll, they have no
     notifications; the default is 1 s);
   - LangGraph + ``PostgresSaver``: LangGraph has no work queue, so each process simply
     invokes its share of the N graphs (a three-node graph, ``durability="sync"``) from
     ``concurrency`` threads. It pays no claiming, leasing or fencing: an upper bound for
     a checkpointer, not a like-for-like worker.

   Each worker process is started and set up first (imports, connections, DBOS launch;
   plait and LangGraph also drive one warm-up run of their own, then delete it), reports
   ready, and is then released at once: the figure is N / (wall time from the release to
   the last process finishing). Without plait's warm-up its first drive in each process
   paid its one-off costs inside the window (the modules a drive imports, the flow file
   loaded and its tools' schemas built: ~80 ms of client CPU, during which the process's
   other drives wait), once per process: with 2 processes twice, against half the runs
   each, which made 2 processes slower than 1 (bench/pg_costs.py ``--scenario
   processes`` counts it). plait's worker also opens its connections (``Worker.open``:
   the listener's and its pool's) before the clock, as LangGraph's pool opens its
   ``concurrency`` connections before it. Each process also reports the CPU time of
   its work phase, and the CPU time of the server processes serving the bench database
   is sampled from /proc while the work runs.

2. **Per-superstep cost** of a loop ``step -> step (while i < S) -> done`` whose body
   only counts, on SQLite (WAL, ``synchronous=NORMAL``: plait's default durability) and
   on PostgreSQL (``synchronous_commit=on``: every commit waits for the WAL flush), for
   plait (``Runtime`` on each store) and LangGraph (``SqliteSaver``/``PostgresSaver``,
   ``durability="sync"``).

    .venv/bin/python bench/workers.py [--runs N] [--concurrency C] [--steps S] [--quick]

``--pg URL`` names a role that may create databases (default: the local server, user
postgres). The peers need ``pip install dbos langgraph-checkpoint-postgres``; a peer that
cannot be imported is reported as not measured, never estimated.

What the figures can and cannot show: the client processes and the server share this
machine's cores (``os.cpu_count()``, printed), so adding a worker process takes CPU from
the server, and anything else running on the machine (printed: the load average) takes
CPU from both. Runs per second are therefore this machine's figures, not a scaling curve:
they cannot show how plait scales with cores. Runs per CPU-second (client plus the
server backends of the bench database; the WAL writer and other shared server processes
are not counted) is the steadier efficiency figure and the one to compare across sides;
ratios between sides measured in the same run are more trustworthy than absolute rates.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit, urlunsplit

ADMIN_URL = os.environ.get("PLAIT_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
HERE = Path(__file__).resolve()
TOOLS = """
def first(n: int) -> dict:
    return {"a": n + 1}


def second(a: int) -> dict:
    return {"b": a * 2}


def third(b: int) -> dict:
    return {"c": b + 1}
"""
FLOW = """name: three
nodes:
  - {id: first, tool: first}
  - {id: second, tool: second}
  - {id: third, tool: third}
edges:
  - {from: first, to: second}
  - {from: second, to: third}
tools:
  first: {python: "benchtools:first"}
  second: {python: "benchtools:second"}
  third: {python: "benchtools:third"}
"""
DBOS_WORKFLOW = "three_steps"
DBOS_QUEUE = "bench"
DBOS_POLL_S = 0.01

# ---------------------------------------------------------------------------
# databases
# ---------------------------------------------------------------------------


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def create_database(tag: str) -> tuple[str, str]:
    import psycopg

    name = f"bench_{tag}_{secrets.token_hex(3)}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name, with_database(ADMIN_URL, name)


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class ServerCpu:
    """CPU seconds of the server processes serving one database, sampled from /proc."""

    def __init__(self, dbname: str) -> None:
        self.dbname = dbname
        self.base: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.available = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tick = os.sysconf("SC_CLK_TCK")

    def _pids(self) -> list[int]:
        import psycopg

        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.dbname,)
            ).fetchall()
        return [int(row[0]) for row in rows]

    def _ticks(self, pid: int) -> int | None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return None
        fields = stat[stat.rfind(b")") + 2 :].split()
        return int(fields[11]) + int(fields[12])  # utime + stime

    def start(self) -> None:
        for pid in self._pids():
            ticks = self._ticks(pid)
            if ticks is None:
                self.available = False
                return
            self.base[pid] = self.last[pid] = ticks
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self._once()

    def _once(self) -> None:
        for pid in self._pids():
            ticks = self._ticks(pid)
            if ticks is not None:
                self.base.setdefault(pid, 0)  # a backend that connected after the start
                self.last[pid] = ticks

    def stop(self) -> float | None:
        self._once()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self.available:
            return None
        return sum(self.last[p] - self.base[p] for p in self.last) / self._tick


# ---------------------------------------------------------------------------
# 1. runs per second: the parent
# ---------------------------------------------------------------------------


def prepare(system: str, url: str, runs: int, workdir: Path) -> None:
    """Queue (plait, DBOS) or set up (LangGraph) N runs on a fresh database; not timed."""
    if system == "plait":
        import asyncio

        from plait import Runtime, load_workflow

        wf = load_workflow(workdir / "flow.yaml")
        with Runtime(url, principal="bench") as rt:

            async def queue_all() -> None:
                for i in range(runs):
                    await rt.enqueue(wf, {"n": i}, run_id=f"r{i:05}")

            asyncio.run(queue_all())
    else:  # DBOS needs its schema (a launch) before a client can enqueue
        child = subprocess.run(
            [
                sys.executable,
                str(HERE),
                "--child",
                f"{system}-setup",
                "--db",
                url,
                "--runs",
                str(runs),
                "--workdir",
                str(workdir),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if child.returncode != 0:
            raise RuntimeError(f"{system} setup failed: {child.stderr[-2000:]}")


def throughput(
    system: str, workers: int, runs: int, concurrency: int, workdir: Path
) -> dict[str, Any]:
    dbname, url = create_database(f"{system}{workers}")
    try:
        prepare(system, url, runs, workdir)
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(HERE),
                    "--child",
                    system,
                    "--db",
                    url,
                    "--runs",
                    str(runs),
                    "--concurrency",
                    str(concurrency),
                    "--share",
                    f"{i}/{workers}",
                    "--workdir",
                    str(workdir),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=workdir,
            )
            for i in range(workers)
        ]
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready":
                _, err = proc.communicate()
                raise RuntimeError(f"{system} worker did not start: {line}{err[-2000:]}")
        cpu = ServerCpu(dbname)
        cpu.start()
        started = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = []
        for proc in procs:
            out, err = proc.communicate(timeout=1800)
            if proc.returncode != 0:
                raise RuntimeError(f"{system} worker failed: {err[-2000:]}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
        wall = time.perf_counter() - started
        server_cpu = cpu.stop()
        done = check_done(system, url, runs)
        client_cpu = sum(r["cpu_s"] for r in reports)
        total_cpu = client_cpu + (server_cpu or 0.0)
        return {
            "system": system,
            "workers": workers,
            "runs": runs,
            "completed": done,
            "wall_s": wall,
            "runs_per_s": runs / wall,
            "client_cpu_s": client_cpu,
            "server_cpu_s": server_cpu,
            "runs_per_cpu_s": runs / total_cpu if server_cpu is not None else None,
            "per_worker": [r["done"] for r in reports],
        }
    finally:
        drop_database(dbname)


def check_done(system: str, url: str, runs: int) -> int:
    import psycopg

    query = {
        "plait": "SELECT count(*) FROM runs WHERE status = 'completed'",
        "dbos": "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'",
        "langgraph": "SELECT count(DISTINCT thread_id) FROM checkpoints"
        " WHERE metadata->>'step' = '3'",
    }[system]
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    done = int(row[0]) if row else 0
    if done != runs:
        raise RuntimeError(f"{system}: {done} of {runs} runs completed")
    return done


# ---------------------------------------------------------------------------
# 1. runs per second: the worker processes (--child SYSTEM)
# ---------------------------------------------------------------------------


def wait_for_go() -> tuple[float, float]:
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if sys.stdin.readline().strip() != "go":
        raise SystemExit(2)
    return time.perf_counter(), time.process_time()


def finish(started: tuple[float, float], done: int, **more: Any) -> None:
    wall, cpu = started
    report = {
        "done": done,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        **more,
    }
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()


def child_plait(args: argparse.Namespace) -> None:
    sys.path.insert(0, args.workdir)
    import benchtools  # noqa: F401  (imported before the clock starts)

    from plait import Runtime
    from plait.driver.worker import Worker

    with Runtime(args.db, principal="bench") as rt:
        worker = Worker(rt, concurrency=args.concurrency, once=True)
        claims = count_claims(worker)
        warm_up(rt, Path(args.workdir), f"warm{os.getpid()}")
        worker.open()  # its listener and pool connections, as LangGraph's pool opens first
        started = wait_for_go()
        report = worker.run()
        if report.errors:
            raise RuntimeError(f"plait worker errors: {report.errors[:3]}")
        finish(started, sum(report.statuses.values()), claims=claims)


def warm_up(rt: Any, workdir: Path, run_id: str) -> None:
    """One run queued and driven as the worker drives its runs (the worker's runtime loads
    the file, imports what a drive uses, opens a connection), then deleted: what the
    LangGraph child's warm-up invocation does for LangGraph, before the clock starts. The
    bench runs stay queued meanwhile (a drive of one run by id claims nothing else)."""
    import asyncio

    from plait import load_workflow

    async def warm() -> None:
        await rt.enqueue(load_workflow(workdir / "flow.yaml"), {"n": -1}, run_id=run_id)
        assert (await rt.resume(run_id)).status == "completed"

    asyncio.run(warm())
    now = rt.clock()
    rt.store.gc(now + 1, now)  # the warm run (every bench run is still queued)


def count_claims(worker: Any) -> dict[str, int]:
    """Count the worker's ``claim_work`` calls (``claims``) and those that took nothing
    (``empty``), updated as they happen: the work a worker does to find its runs."""
    counts = {"claims": 0, "empty": 0}
    claim_work = worker.store.claim_work

    def counted(*args: Any, **kwargs: Any) -> Any:
        claimed = claim_work(*args, **kwargs)
        counts["claims"] += 1
        counts["empty"] += not claimed
        return claimed

    worker.store.claim_work = counted
    return counts


def dbos_app(url: str, executor: str = "setup") -> Any:
    from dbos import DBOS

    DBOS(
        config={
            "name": "plaitbench",
            "system_database_url": url,
            "log_level": "ERROR",
            "executor_id": executor,
        }
    )

    @DBOS.step()
    def first(n: int) -> int:
        return n + 1

    @DBOS.step()
    def second(a: int) -> int:
        return a * 2

    @DBOS.step()
    def third(b: int) -> int:
        return b + 1

    @DBOS.workflow(name=DBOS_WORKFLOW)
    def three_steps(n: int) -> int:
        return third(second(first(n)))

    return DBOS


def child_dbos_setup(args: argparse.Namespace) -> None:
    from dbos import DBOSClient

    dbos = dbos_app(args.db)
    dbos.launch()  # creates the system schema
    dbos.destroy()
    client = DBOSClient(system_database_url=args.db)
    for i in range(args.runs):
        client.enqueue({"queue_name": DBOS_QUEUE, "workflow_name": DBOS_WORKFLOW}, i)
    client.destroy()


def child_dbos(args: argparse.Namespace) -> None:
    import psycopg

    dbos = dbos_app(args.db, f"worker-{args.share.split('/')[0]}")
    dbos.launch()
    with psycopg.connect(args.db, autocommit=True) as conn:
        started = wait_for_go()
        dbos.register_queue(
            DBOS_QUEUE, worker_concurrency=args.concurrency, polling_interval_sec=DBOS_POLL_S
        )
        while True:  # every process waits until the queue is drained
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status <> 'SUCCESS'),"
                " count(*) FILTER (WHERE status = 'SUCCESS' AND executor_id = %s)"
                " FROM dbos.workflow_status",
                (dbos.executor_id,),
            ).fetchone()
            assert row is not None
            if row[0] == 0:
                break
            time.sleep(0.01)
        finish(started, int(row[1]))
    dbos.destroy()


class LgState(TypedDict, total=False):
    n: int
    a: int
    b: int
    c: int


def lg_graph(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(LgState)
    graph.add_node("first", lambda s: {"a": s["n"] + 1})
    graph.add_node("second", lambda s: {"b": s["a"] * 2})
    graph.add_node("third", lambda s: {"c": s["b"] + 1})
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", "third")
    graph.add_edge("third", END)
    return graph.compile(checkpointer=checkpointer)


def lg_pool(url: str, size: int) -> Any:
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    return ConnectionPool(url, kwargs=kwargs, min_size=size, max_size=size, open=True)


def child_langgraph_setup(args: argparse.Namespace) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with lg_pool(args.db, 1) as pool:
        PostgresSaver(pool).setup()


def child_langgraph(args: argparse.Namespace) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    index, of = (int(x) for x in args.share.split("/"))
    mine = [i for i in range(args.runs) if i % of == index]
    with lg_pool(args.db, args.concurrency) as pool:
        app = lg_graph(PostgresSaver(pool))
        app.invoke({"n": -1}, {"configurable": {"thread_id": f"warm{index}"}})
        with pool.connection() as conn:  # the warm-up run is not a bench run
            conn.execute("DELETE FROM checkpoints WHERE thread_id = %s", (f"warm{index}",))

        def one(i: int) -> None:
            config = {"configurable": {"thread_id": f"t{i:05}"}}
            out = app.invoke({"n": i}, config, durability="sync")
            assert out["c"] == (i + 1) * 2 + 1

        started = wait_for_go()
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool_threads:
            list(pool_threads.map(one, mine))
        finish(started, len(mine))


# ---------------------------------------------------------------------------
# 2. per-superstep cost, SQLite vs PostgreSQL
# ---------------------------------------------------------------------------


def plait_loop(n: int) -> Any:
    from plait import Workflow

    def step(i: int) -> dict[str, Any]:
        return {"i": i + 1}

    def done() -> dict[str, Any]:
        return {}

    return (
        Workflow.new("loop")
        .node("step", tool=step)
        .node("done", tool=done)
        .edge("step", "step", when=f"i < {n}", max_cycles=n)
        .edge("step", "done", when=f"i >= {n}")
        .budget(max_supersteps=n + 10)
    )


def plait_superstep_ms(url: str, steps: int) -> float:
    from plait import Runtime

    with Runtime(url, principal="bench") as rt:
        rt.run_sync(plait_loop(5), {"i": 0})  # warm
        started = time.perf_counter()
        result = rt.run_sync(plait_loop(steps), {"i": 0})
        elapsed = time.perf_counter() - started
    assert result.status == "completed" and result.context["i"] == steps
    return elapsed / (steps + 1) * 1000


class LoopState(TypedDict):
    i: int


def lg_loop(checkpointer: Any, n: int) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(LoopState)
    graph.add_node("step", lambda s: {"i": s["i"] + 1})
    graph.add_node("done", lambda s: {})
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["i"] < n else "done")
    graph.add_edge("done", END)
    return graph.compile(checkpointer=checkpointer)


def lg_superstep_ms(checkpointer: Any, steps: int) -> float:
    warm = lg_loop(checkpointer, 5)
    warm.invoke({"i": 0}, {"configurable": {"thread_id": "warm"}, "recursion_limit": 100})
    app = lg_loop(checkpointer, steps)
    config = {"configurable": {"thread_id": "loop"}, "recursion_limit": steps + 10}
    started = time.perf_counter()
    out = app.invoke({"i": 0}, config, durability="sync")
    elapsed = time.perf_counter() - started
    assert out["i"] == steps
    return elapsed / (steps + 1) * 1000


def supersteps(steps: int, repeats: int) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def median(fn: Callable[[], float]) -> float:
        return statistics.median(fn() for _ in range(repeats))

    def plait_sqlite() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            return plait_superstep_ms(f"sqlite:///{tmp}/plait.db", steps)

    def plait_pg() -> float:
        name, url = create_database("loop")
        try:
            return plait_superstep_ms(url, steps)
        finally:
            drop_database(name)

    found["plait_sqlite_ms"] = median(plait_sqlite)
    found["plait_pg_ms"] = median(plait_pg)
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError as exc:
        found["langgraph"] = f"not measured: {exc}"
        return found

    def lg_sqlite() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            conn = sqlite3.connect(f"{tmp}/lg.db", check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            try:
                return lg_superstep_ms(SqliteSaver(conn), steps)
            finally:
                conn.close()

    def lg_pg() -> float:
        name, url = create_database("lgloop")
        try:
            with lg_pool(url, 1) as pool:
                saver = PostgresSaver(pool)
                saver.setup()
                return lg_superstep_ms(saver, steps)
        finally:
            drop_database(name)

    found["langgraph_sqlite_ms"] = median(lg_sqlite)
    found["langgraph_pg_ms"] = median(lg_pg)
    return found


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def available(system: str) -> str | None:
    """None when the peer can run here, else why not."""
    modules = {
        "plait": ["plait.store.postgres"],
        "dbos": ["dbos"],
        "langgraph": ["langgraph.checkpoint.postgres"],
    }[system]
    for module in modules:
        try:
            __import__(module)
        except ImportError as exc:
            return f"not measured: cannot import {module} ({exc})"
    return None


def fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="60 runs, 100 steps, 1 repeat")
    parser.add_argument("--pg", help="admin URL of the PostgreSQL server")
    parser.add_argument("--only", choices=["throughput", "supersteps"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--share", default="0/1", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global ADMIN_URL
    if args.pg:
        ADMIN_URL = args.pg
    if args.child:
        {
            "plait": child_plait,
            "dbos": child_dbos,
            "dbos-setup": child_dbos_setup,
            "langgraph": child_langgraph,
            "langgraph-setup": child_langgraph_setup,
        }[args.child](args)
        return
    if args.quick:
        args.runs, args.steps, args.repeats = 60, 100, 1

    cores = os.cpu_count() or 1
    print(
        f"machine: {cores} cores shared by the clients and the PostgreSQL server;"
        f" load average before: {os.getloadavg()[0]:.2f}"
    )
    if args.only != "supersteps":
        print(
            f"\n1. runs per second: {args.runs} three-step runs,"
            f" {args.concurrency} in flight per worker process"
        )
        results: dict[tuple[str, int], dict[str, Any]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            (workdir / "benchtools.py").write_text(TOOLS)
            (workdir / "flow.yaml").write_text(FLOW)
            header = (
                f"{'side':<28}{'procs':>6}{'runs/s':>9}{'per core':>10}"
                f"{'client cpu s':>14}{'server cpu s':>14}{'runs/cpu-s':>12}  split"
            )
            print(header)
            for system in ("plait", "dbos", "langgraph"):
                why = available(system)
                if why is not None:
                    print(f"{system:<28}{why}")
                    continue
                for workers in (1, 2):
                    try:
                        r = throughput(system, workers, args.runs, args.concurrency, workdir)
                    except Exception as exc:  # a peer that fails is reported, not faked
                        print(f"{system:<28}{workers:>6}  not measured: {exc}")
                        continue
                    results[(system, workers)] = r
                    name = {
                        "plait": "plait worker",
                        "dbos": "DBOS queue",
                        "langgraph": "LangGraph+PostgresSaver",
                    }[system]
                    print(
                        f"{name:<28}{workers:>6}{r['runs_per_s']:>9.1f}"
                        f"{r['runs_per_s'] / cores:>10.1f}{r['client_cpu_s']:>14.2f}"
                        f"{fmt(r['server_cpu_s'], 2):>14}{fmt(r['runs_per_cpu_s']):>12}"
                        f"  {r['per_worker']}"
                    )
        print("\n   ratios (plait / peer, same process count):")
        for peer in ("dbos", "langgraph"):
            for workers in (1, 2):
                p, q = results.get(("plait", workers)), results.get((peer, workers))
                if p is None or q is None:
                    print(f"   {peer} x{workers}: not measured")
                    continue
                cpu = (
                    f"{p['runs_per_cpu_s'] / q['runs_per_cpu_s']:.2f}"
                    if p["runs_per_cpu_s"] and q["runs_per_cpu_s"]
                    else "n/a"
                )
                print(
                    f"   vs {peer:<10} x{workers}: runs/s {p['runs_per_s'] / q['runs_per_s']:.2f},"
                    f" runs per cpu-second {cpu}"
                )
        for system in ("plait", "dbos", "langgraph"):
            one, two = results.get((system, 1)), results.get((system, 2))
            if one and two:
                print(
                    f"   {system}: 2 processes / 1 process = "
                    f"{two['runs_per_s'] / one['runs_per_s']:.2f}"
                )
    if args.only != "throughput":
        print(
            f"\n2. per-superstep cost: a {args.steps}-step counting loop, median of"
            f" {args.repeats} (ms per superstep)"
        )
        s = supersteps(args.steps, args.repeats)
        print(
            f"   plait      SQLite {s['plait_sqlite_ms']:.3f}   PostgreSQL {s['plait_pg_ms']:.3f}"
            f"   PG/SQLite {s['plait_pg_ms'] / s['plait_sqlite_ms']:.2f}"
        )
        if "langgraph_pg_ms" in s:
            print(
                f"   LangGraph  SQLite {s['langgraph_sqlite_ms']:.3f}"
                f"   PostgreSQL {s['langgraph_pg_ms']:.3f}"
                f"   PG/SQLite {s['langgraph_pg_ms'] / s['langgraph_sqlite_ms']:.2f}"
            )
            print(
                f"   plait/LangGraph: SQLite {s['plait_sqlite_ms'] / s['langgraph_sqlite_ms']:.2f},"
                f" PostgreSQL {s['plait_pg_ms'] / s['langgraph_pg_ms']:.2f}"
            )
        else:
            print(f"   LangGraph: {s['langgraph']}")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
