"""What a run costs PostgreSQL, counted rather than timed: statements, round trips, transactions.

Wall time on a shared machine moves with the load; these counts do not. Between the client
and the server sits a small TCP proxy (this file) that reads the frontend protocol:

- **statements**: simple queries (``Q``) plus extended-protocol executes (``E``);
- **round trips**: the times the client sends after the server has answered (a burst of
  pipelined messages is one);

and the server's own statistics, read after every connection of the measured phase has
closed (a backend flushes them as it exits):

- **transactions**: ``pg_stat_database.xact_commit`` of the bench database (a read in
  autocommit is one too);
- **flushing transactions**: transaction ids handed out (``pg_current_xact_id`` before and
  after): each writing transaction takes one and, with ``synchronous_commit = on``, waits
  for its WAL flush at commit. The id counter is cluster-wide, so point ``--pg`` at a
  server nothing else uses (autovacuum off), e.g. a private one::

      initdb -D /tmp/pgpriv -A trust -U postgres
      pg_ctl -D /tmp/pgpriv -o "-p 5499 -c autovacuum=off" start

Scenarios (``--scenario``, all but ``processes`` by default), plait and LangGraph +
``PostgresSaver`` side by side (bench/workers.py's three-step run and counting loop):

- ``worker``: N three-step runs queued (not counted), then one ``Worker(once=True)`` drives
  them; per run;
- ``processes``: as ``worker``, but 1 to ``--processes`` worker processes share the queue
  (bench/workers.py's plait child, warm-up included, as bench/workers.py runs them); per
  run, with each process's ``claim_work`` calls (empty ones too) and client CPU time;
  ``--tally`` adds the statements per run by kind;
- ``start``: N three-step runs started and driven in process (``Runtime.run_sync``) against
  N LangGraph invocations; per run;
- ``superstep``: the counting loop at S and 2S steps; the difference per superstep.

    .venv/bin/python bench/pg_costs.py --pg postgresql://postgres@127.0.0.1:5499/postgres
"""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workers as bench  # noqa: E402  (bench/workers.py: the same flows and peers)

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104


@dataclass
class Counts:
    """What the proxy saw, summed over its connections."""

    statements: int = 0
    round_trips: int = 0
    syncs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    trace: list[str] | None = None  # the statements sent, when asked for (--trace)

    def add(self, statements: int, round_trips: int, syncs: int) -> None:
        with self.lock:
            self.statements += statements
            self.round_trips += round_trips
            self.syncs += syncs

    def reset(self) -> None:
        with self.lock:
            self.statements = self.round_trips = self.syncs = 0
            if self.trace is not None:
                self.trace = []


class Proxy:
    """A counting TCP proxy to ``upstream`` (host, port); ``port`` is where it listens."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.counts = Counts()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self.counts)
            threading.Thread(
                target=link.client_to_server, args=(client, server), daemon=True
            ).start()
            threading.Thread(
                target=link.server_to_client, args=(server, client), daemon=True
            ).start()


class _Link:
    """One client connection: parses what the client sends, notes when the server answered."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.answered = True  # the server spoke since the client last sent
        self.started = False  # past the startup packet
        self.parsed: dict[bytes, str] = {}
        self.bound = ""

    def _trace(self, kind: bytes, body: bytes, trips: int) -> None:
        """Note a statement's text (simple, or parsed then executed) and each sync."""
        trace = self.counts.trace
        assert trace is not None
        if kind == b"Q":
            trace.append(f"Q {body[:-1].decode()[:110]}")
        elif kind == b"P":
            name, rest = body.split(b"\0", 1)
            self.parsed[name] = rest.split(b"\0", 1)[0].decode()
        elif kind == b"B":
            self.bound = self.parsed.get(body.split(b"\0")[1], "?")
        elif kind == b"E":
            trace.append(f"E {self.bound[:110]}")
        elif kind == b"S":
            trace.append("  sync")

    def client_to_server(self, client: socket.socket, server: socket.socket) -> None:
        buf = b""
        while True:
            try:
                chunk = client.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                _shut(server)
                return
            trips = 1 if self.answered and self.started else 0
            self.answered = False
            if trips and self.counts.trace is not None:
                self.counts.trace.append("-- round trip")
            buf += chunk
            statements = syncs = 0
            while True:
                if not self.started:
                    if len(buf) < 8:
                        break
                    (length,) = struct.unpack("!I", buf[:4])
                    if len(buf) < length:
                        break
                    (code,) = struct.unpack("!I", buf[4:8])
                    buf = buf[length:]
                    if code not in (_SSL_REQUEST, _GSS_REQUEST):
                        self.started = True
                    continue
                if len(buf) < 5:
                    break
                kind = buf[:1]
                (length,) = struct.unpack("!I", buf[1:5])
                if len(buf) < 1 + length:
                    break
                body, buf = buf[5 : 1 + length], buf[1 + length :]
                if self.counts.trace is not None:
                    self._trace(kind, body, trips)
                if kind in (b"Q", b"E"):
                    statements += 1
                elif kind == b"S":
                    syncs += 1
            self.counts.add(statements, trips, syncs)
            try:
                server.sendall(chunk)
            except OSError:
                return

    def server_to_client(self, server: socket.socket, client: socket.socket) -> None:
        while True:
            try:
                chunk = server.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                _shut(client)
                return
            self.answered = True
            try:
                client.sendall(chunk)
            except OSError:
                return


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


# ---------------------------------------------------------------------------
# the server's side
# ---------------------------------------------------------------------------


def _admin(url: str, query: str, params: tuple[Any, ...] = ()) -> Any:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
        return None if row is None else row[0]


@dataclass(frozen=True)
class Snapshot:
    xacts: int
    xid: int


def snapshot(admin_url: str, dbname: str) -> Snapshot:
    """Transactions of ``dbname`` so far (every backend of it has exited) and the next xid."""
    for _ in range(100):  # backends that just closed exit (and flush their stats) shortly
        busy = _admin(
            admin_url, "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)
        )
        if not busy:
            break
        time.sleep(0.05)
    _admin(admin_url, "SELECT pg_stat_clear_snapshot()")
    xacts = _admin(
        admin_url, "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (dbname,)
    )
    xid = int(str(_admin(admin_url, "SELECT pg_current_xact_id()")))
    return Snapshot(int(xacts), xid)


@dataclass
class Measured:
    statements: int
    round_trips: int
    xacts: int
    flushing: int
    trace: list[str] = field(default_factory=list)

    def per(self, n: float) -> str:
        return (
            f"{self.statements / n:8.2f} statements {self.round_trips / n:8.2f} round trips"
            f" {self.xacts / n:7.2f} transactions {self.flushing / n:6.2f} flushing"
        )

    def minus(self, other: Measured) -> Measured:
        return Measured(
            self.statements - other.statements,
            self.round_trips - other.round_trips,
            self.xacts - other.xacts,
            self.flushing - other.flushing,
            self.trace,
        )


class Bench:
    """A fresh database per measurement, reached directly and through the proxy."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        parts = urlsplit(admin_url)
        self.proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))

    @contextmanager
    def database(self) -> Iterator[tuple[str, str, str]]:
        """(name, direct url, proxied url) of a new database, dropped afterwards."""
        import psycopg

        name = f"costs_{secrets.token_hex(3)}"
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        parts = urlsplit(self.admin_url)
        direct = urlunsplit((parts.scheme, parts.netloc, "/" + name, "sslmode=disable", ""))
        user = f"{parts.username}@" if parts.username else ""
        netloc = f"{user}127.0.0.1:{self.proxy.port}"
        proxied = urlunsplit((parts.scheme, netloc, "/" + name, "sslmode=disable", ""))
        try:
            yield name, direct, proxied
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextmanager
    def counting(self, dbname: str, into: list[Measured]) -> Iterator[None]:
        """Count what the block does; every connection it opened must be closed at its end."""
        before = snapshot(self.admin_url, dbname)
        self.proxy.counts.reset()
        yield
        time.sleep(0.1)  # the proxy's last chunks
        statements, trips = self.proxy.counts.statements, self.proxy.counts.round_trips
        after = snapshot(self.admin_url, dbname)
        # the snapshot's own pg_current_xact_id takes one id
        measured = Measured(
            statements, trips, after.xacts - before.xacts, after.xid - before.xid - 1
        )
        measured.trace = list(self.proxy.counts.trace or [])
        into.append(measured)


# ---------------------------------------------------------------------------
# scenarios
# ---------------------------------------------------------------------------


def plait_worker(b: Bench, workdir: Path, runs: int, concurrency: int) -> Measured:
    from plait import Runtime
    from plait.driver.worker import Worker

    with b.database() as (name, direct, proxied):
        bench.prepare("plait", direct, runs, workdir)
        out: list[Measured] = []
        with b.counting(name, out), Runtime(proxied, principal="bench") as rt:
            report = Worker(rt, concurrency=concurrency, once=True).run()
        assert sum(report.statuses.values()) == runs, report.to_json()
        # opening the store (its schema check) is not a run's cost
        with b.counting(name, out), Runtime(proxied, principal="bench"):
            pass
        return out[0].minus(out[1])


def plait_processes(
    b: Bench, workdir: Path, runs: int, concurrency: int, processes: int
) -> tuple[Measured, list[dict[str, Any]]]:
    """N runs queued, then ``processes`` worker processes (bench/workers.py's plait child:
    ``Worker(once=True)``) share the queue; counted from their release to their end. Each
    child's setup (imports, opening the store, a warm connection) is not counted: the
    proxy's counts restart at the release, and the server's transactions of a second set
    of children released to exit at once are subtracted. Also each child's report: runs
    driven, client CPU seconds, ``claim_work`` calls and empty ones."""
    with b.database() as (name, direct, proxied):
        bench.prepare("plait", direct, runs, workdir)
        out: list[Measured] = []
        reports: list[dict[str, Any]] = []
        with b.counting(name, out):
            reports = _children(b, workdir, proxied, runs, concurrency, processes, "go")
        with b.counting(name, out):
            _children(b, workdir, proxied, runs, concurrency, processes, "skip")
        work, setup = out
        assert sum(r["done"] for r in reports) == runs, reports
        measured = Measured(
            work.statements, work.round_trips, work.xacts - setup.xacts,
            work.flushing - setup.flushing, work.trace,
        )  # fmt: skip
        return measured, reports


def _children(
    b: Bench, workdir: Path, url: str, runs: int, concurrency: int, processes: int, say: str
) -> list[dict[str, Any]]:
    """Start the worker processes, wait until each is ready, restart the proxy's counts and
    tell them ``say`` ("go": work and report; anything else: exit)."""
    command = [sys.executable, str(HERE / "workers.py"), "--child", "plait", "--db", url]
    command += ["--runs", str(runs), "--concurrency", str(concurrency)]
    command += ["--workdir", str(workdir)]
    procs = [
        subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=workdir
        )
        for _ in range(processes)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    b.proxy.counts.reset()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(say + "\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        answer, _ = proc.communicate(timeout=900)
        if say == "go":
            assert proc.returncode == 0, answer
            reports.append(json.loads(answer.strip().splitlines()[-1]))
    return reports


def tally(trace: list[str], n: float) -> str:
    """Statements per run by their first words (a --trace of the counted phase)."""
    kinds = Counter(line[:72] for line in trace if line[:2] in ("Q ", "E "))
    return "\n".join(f"  {count / n:7.2f}  {kind}" for kind, count in kinds.most_common())


def plait_start(b: Bench, workdir: Path, runs: int) -> Measured:
    from plait import Runtime, load_workflow

    wf = load_workflow(workdir / "flow.yaml")
    with b.database() as (name, _, proxied):
        with Runtime(proxied, principal="bench") as rt:  # schema
            rt.run_sync(wf, {"n": -1})
        out: list[Measured] = []
        with b.counting(name, out), Runtime(proxied, principal="bench") as rt:
            for i in range(runs):
                assert rt.run_sync(wf, {"n": i}).status == "completed"
        with b.counting(name, out), Runtime(proxied, principal="bench"):
            pass
        return out[0].minus(out[1])


def plait_loop(b: Bench, steps: int) -> Measured:
    from plait import Runtime

    with b.database() as (name, _, proxied):
        with Runtime(proxied, principal="bench") as rt:
            rt.run_sync(bench.plait_loop(5), {"i": 0})
        out: list[Measured] = []
        with b.counting(name, out), Runtime(proxied, principal="bench") as rt:
            assert rt.run_sync(bench.plait_loop(steps), {"i": 0}).context["i"] == steps
        return out[0]


def langgraph_runs(b: Bench, runs: int) -> Measured:
    from langgraph.checkpoint.postgres import PostgresSaver

    with b.database() as (name, direct, proxied):
        with bench.lg_pool(direct, 1) as pool:
            PostgresSaver(pool).setup()
        out: list[Measured] = []
        with b.counting(name, out), bench.lg_pool(proxied, 1) as pool:
            app = bench.lg_graph(PostgresSaver(pool))
            for i in range(runs):
                app.invoke({"n": i}, {"configurable": {"thread_id": f"t{i}"}}, durability="sync")
        with b.counting(name, out), bench.lg_pool(proxied, 1):
            pass
        return out[0].minus(out[1])


def langgraph_loop(b: Bench, steps: int) -> Measured:
    from langgraph.checkpoint.postgres import PostgresSaver

    with b.database() as (name, direct, proxied):
        with bench.lg_pool(direct, 1) as pool:
            PostgresSaver(pool).setup()
        out: list[Measured] = []
        with b.counting(name, out), bench.lg_pool(proxied, 1) as pool:
            app = bench.lg_loop(PostgresSaver(pool), steps)
            config = {"configurable": {"thread_id": "loop"}, "recursion_limit": steps + 10}
            assert app.invoke({"i": 0}, config, durability="sync")["i"] == steps
        return out[0]


def per_step(measure: Callable[[int], Measured], steps: int) -> Measured:
    return measure(2 * steps).minus(measure(steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5499/postgres")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument(
        "--scenario", action="append", choices=["worker", "processes", "start", "superstep"]
    )
    parser.add_argument("--processes", type=int, default=2, help="worker processes at most")
    parser.add_argument("--tally", action="store_true", help="statements per run by kind")
    parser.add_argument("--plait-only", action="store_true")
    parser.add_argument("--trace", action="store_true", help="print the statements sent")
    args = parser.parse_args()
    scenarios = args.scenario or ["worker", "start", "superstep"]
    b = Bench(args.pg)
    if args.trace or args.tally:
        b.proxy.counts.trace = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "benchtools.py").write_text(bench.TOOLS)
        (workdir / "flow.yaml").write_text(bench.FLOW)
        sys.path.insert(0, str(workdir))
        if "worker" in scenarios:
            for c in (1, args.concurrency):
                m = plait_worker(b, workdir, args.runs, c)
                print(f"worker c={c:<3} plait     per run: {m.per(args.runs)}")
                if args.trace:
                    print("\n".join(m.trace))
        if "processes" in scenarios:
            for p in range(1, args.processes + 1):
                m, reports = plait_processes(b, workdir, args.runs, args.concurrency, p)
                print(f"processes={p} plait     per run: {m.per(args.runs)}")
                claims = sum(r["claims"]["claims"] for r in reports)
                empty = sum(r["claims"]["empty"] for r in reports)
                cpu = sum(r["cpu_s"] for r in reports)
                print(
                    f"             claims per run {claims / args.runs:.2f} (empty {empty}),"
                    f" client CPU ms per run {cpu * 1000 / args.runs:.2f},"
                    f" runs per process {[r['done'] for r in reports]}"
                )
                if args.tally:
                    print(tally(m.trace, args.runs))
        if "start" in scenarios:
            m = plait_start(b, workdir, args.runs)
            print(f"start        plait     per run: {m.per(args.runs)}")
            if not args.plait_only:
                m = langgraph_runs(b, args.runs)
                print(f"start        langgraph per run: {m.per(args.runs)}")
        if "superstep" in scenarios:
            m = per_step(lambda s: plait_loop(b, s), args.steps)
            print(f"superstep    plait     per step: {m.per(args.steps)}")
            if not args.plait_only:
                m = per_step(lambda s: langgraph_loop(b, s), args.steps)
                print(f"superstep    langgraph per step: {m.per(args.steps)}")


if __name__ == "__main__":
    main()
