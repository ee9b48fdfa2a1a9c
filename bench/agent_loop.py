"""Agent loop: K scripted tool round-trips, plait next to pydantic-ai and LangGraph in the same run.

A *turn* is one model call that asks for one tool call (``add(a=i, b=1)``) plus that
tool call; after K turns the model answers ``done``. No network, no real model: the
model side is scripted on all three, so what is measured is each runtime's own cost
per turn.

- **plait** (durable): a workflow of ONE abstract node offering the tool ``add``, its
  model ``scripted:<answers.json>`` (K responses calling ``add``, then a final text),
  run by ``Runtime("sqlite:///...").run_sync`` on a fresh file: every turn's intents
  and results are journaled (WAL, ``synchronous=NORMAL``, plait's default).
- **pydantic-ai** (not durable, nothing persisted): ``Agent(FunctionModel(fn))`` with a
  plain tool ``add``; ``fn`` answers from a call counter (O(1), as plait's scripted model
  does), so what grows is pydantic-ai's own handling of the message history it is
  handed every request.
- **LangGraph** (durable): ``create_react_agent`` with a fake chat model (a
  ``FakeMessagesListChatModel`` whose ``bind_tools`` returns itself and whose
  ``_generate`` pops the next scripted ``AIMessage``) and ``SqliteSaver`` on a
  connection with the same PRAGMAs (WAL, ``synchronous=NORMAL``), ``durability="sync"``.
  A run past ``LANGGRAPH_CAP_S`` seconds is stopped and reported as skipped.

Reported per K: µs per turn (median of repeats, each on a fresh file, after a warm-up),
ratios, stored bytes per turn (plait ``stored_bytes(run_id)``; LangGraph
``checkpoints.checkpoint`` + ``writes.value``; pydantic-ai stores nothing, its final
message history as JSON is shown for scale). Growth: µs per turn over the first and the
last 10% of turns of one run (from timestamps taken in the tool), and the marginal cost
and bytes of the extra turns between two sizes against the average of the smaller one.

    .venv/bin/python bench/agent_loop.py [--quick] [--profile]

``--quick``: K = 20 and 200, one repeat. ``--profile``: also cProfile the plait side at
K = 200 and print the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import itertools
import json
import pstats
import sqlite3
import statistics
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plait import Runtime, Workflow

KS = (20, 200, 1000)
QUICK_KS = (20, 200)
REPEATS = 3
LANGGRAPH_CAP_S = 180.0
PROFILE_K = 200
FLAT = 1.25
PRAGMAS = "journal_mode=WAL, synchronous=NORMAL"
INSTRUCTION = "Add one to a number, again and again, with the add tool; then say done."


@dataclass
class Sample:
    """One run: wall and CPU seconds, stored and file bytes (None: nothing stored), and the
    wall and CPU timestamps the tool took at each call."""

    elapsed: float
    cpu: float
    stored: int | None
    file: int | None
    stamps: list[tuple[float, float]] = field(default_factory=list)


def stamp() -> tuple[float, float]:
    """(wall, process CPU) now: the CPU clock is what the load of a shared machine spares."""
    return time.perf_counter(), time.process_time()


class TooSlow(Exception):
    """A LangGraph run passed LANGGRAPH_CAP_S; it is reported as skipped."""


# ---------------------------------------------------------------------------
# plait
# ---------------------------------------------------------------------------


def plait_agent(k: int, answers: Path, stamps: list[tuple[float, float]]) -> Workflow:
    """One abstract node with the tool ``add`` and a scripted model of K tool turns."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        stamps.append(stamp())
        return a + b

    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]} for i in range(k)
    ]
    script.append({"text": "done"})
    answers.write_text(json.dumps(script), encoding="utf-8")
    return (
        Workflow.new("agent")
        .tool(add)
        .node("agent", instruction=INSTRUCTION, tools=["add"])
        .model(f"scripted:{answers}", max_effects_per_attempt=2 * k + 10)
        .budget(max_supersteps=10)
    )


def plait_once(k: int) -> Sample:
    stamps: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.db"
        workflow = plait_agent(k, Path(tmp) / "answers.json", stamps)
        rt = Runtime(f"sqlite:///{path}", principal="bench")
        t0, c0 = stamp()
        result = rt.run_sync(workflow, {})
        t1, c1 = stamp()
        with rt:
            assert result.status == "completed", (result.status, result.outcome)
            assert result.context.get("agent") == "done", result.context
            stored = rt.store.stored_bytes(result.run_id)
        assert len(stamps) == k, len(stamps)
        return Sample(t1 - t0, c1 - c0, stored, file_bytes(path), stamps)


# ---------------------------------------------------------------------------
# pydantic-ai, FunctionModel, no persistence
# ---------------------------------------------------------------------------


def pydantic_once(k: int) -> Sample:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    stamps: list[tuple[float, float]] = []
    calls = 0

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        i, calls = calls, calls + 1
        if i < k:
            return ModelResponse(parts=[ToolCallPart("add", {"a": i, "b": 1})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(scripted), instructions=INSTRUCTION)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        stamps.append(stamp())
        return a + b

    t0, c0 = stamp()
    result = agent.run_sync("go", usage_limits=UsageLimits(request_limit=k + 5))
    t1, c1 = stamp()
    assert result.output == "done", result.output
    messages = result.all_messages()
    returns = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
    assert returns == k == len(stamps), (returns, len(stamps))
    history = len(ModelMessagesTypeAdapter.dump_json(messages))
    return Sample(t1 - t0, c1 - c0, None, history, stamps)


# ---------------------------------------------------------------------------
# LangGraph: create_react_agent + fake chat model + SqliteSaver
# ---------------------------------------------------------------------------


def langgraph_model(k: int, deadline: float) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedChat(FakeMessagesListChatModel):
        """Pops the next scripted AIMessage; binding tools changes nothing."""

        deadline: float = 0.0

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            if time.perf_counter() > self.deadline:
                raise TooSlow(self.i)
            response = self.responses[self.i]
            self.i += 1
            return ChatResult(generations=[ChatGeneration(message=response)])

    script = [
        AIMessage(
            content="",
            tool_calls=[
                {"name": "add", "args": {"a": i, "b": 1}, "id": f"call_{i}", "type": "tool_call"}
            ],
        )
        for i in range(k)
    ]
    script.append(AIMessage(content="done"))
    return ScriptedChat(responses=script, deadline=deadline)


def langgraph_once(k: int, cap_s: float = LANGGRAPH_CAP_S) -> Sample | int:
    """A Sample, or the turn count reached when the run passed ``cap_s`` seconds."""
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1.x
        from langgraph.prebuilt import create_react_agent

    stamps: list[tuple[float, float]] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        stamps.append(stamp())
        return a + b

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l.db"
        conn = sqlite3.connect(path, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        saver = SqliteSaver(conn)
        saver.setup()  # tables made outside the timed region, as plait's Runtime does
        model = langgraph_model(k, 0.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            app = create_react_agent(model, [add], prompt=INSTRUCTION, checkpointer=saver)
        config = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": 2 * k + 10}
        t0, c0 = stamp()
        model.deadline = t0 + cap_s
        try:
            out = app.invoke({"messages": [("user", "go")]}, config, durability="sync")
        except TooSlow:
            conn.close()
            return len(stamps)
        t1, c1 = stamp()
        assert out["messages"][-1].content == "done", out["messages"][-1]
        assert len(stamps) == k, len(stamps)
        sync = conn.execute("PRAGMA synchronous").fetchone()[0]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert (sync, mode) == (1, "wal"), (sync, mode)  # NORMAL, WAL: SqliteSaver kept them
        (ckpt,) = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint)), 0) FROM checkpoints"
        ).fetchone()
        (writes,) = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()
        conn.close()
        return Sample(t1 - t0, c1 - c0, ckpt + writes, file_bytes(path), stamps)


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

SIDES: dict[str, Callable[[int], Sample | int]] = {
    "plait": plait_once,
    "pydantic-ai": pydantic_once,
    "langgraph": langgraph_once,
}
LABELS = {
    "plait": "plait (durable, SQLite)",
    "pydantic-ai": "pydantic-ai (not durable)",
    "langgraph": "langgraph + SqliteSaver",
}


def measure(ks: tuple[int, ...], repeats: int) -> dict[str, dict[int, list[Sample] | int]]:
    """Warm each side up once, then for each K interleave the sides, ``repeats`` times.

    A LangGraph run stopped at the cap leaves an int (turns reached) and no further
    LangGraph runs at that or a larger K.
    """
    for fn in SIDES.values():
        fn(20)
    out: dict[str, dict[int, list[Sample] | int]] = {name: {} for name in SIDES}
    for k in ks:
        for _ in range(repeats):
            for name, fn in SIDES.items():
                if any(isinstance(v, int) for v in out[name].values()):
                    continue  # already past the cap at a smaller or equal K
                got = fn(k)
                if isinstance(got, int):
                    out[name][k] = got
                    continue
                samples = out[name].setdefault(k, [])
                assert isinstance(samples, list)
                samples.append(got)
    return out


def median(samples: list[Sample], of: Callable[[Sample], float]) -> float:
    return statistics.median(of(s) for s in samples)


WALL, CPU = 0, 1


def window_us(stamps: list[tuple[float, float]], clock: int, first: bool) -> float:
    """Mean µs per turn over the first (or last) 10% of turns, from the tool's timestamps."""
    n = max(1, len(stamps) // 10)
    a, b = (0, n) if first else (len(stamps) - 1 - n, len(stamps) - 1)
    return (stamps[b][clock] - stamps[a][clock]) / n * 1e6


def completed(by_k: dict[int, list[Sample] | int], k: int) -> list[Sample] | None:
    got = by_k.get(k)
    return got if isinstance(got, list) else None


# ---------------------------------------------------------------------------
# Profile
# ---------------------------------------------------------------------------


def profile(k: int = PROFILE_K, top: int = 12) -> None:
    """cProfile one plait run of K turns (after a warm-up); top functions."""
    plait_once(20)
    prof = cProfile.Profile()
    prof.runcall(plait_once, k)
    stats = pstats.Stats(prof)
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    print(f"\nprofile: plait agent loop, K={k} ({stats.total_tt:.2f} s under cProfile)")  # type: ignore[attr-defined]
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
    return not any(b in file for b in ("asyncio", "agent_loop.py", "tempfile", "cProfile"))


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
    parser.add_argument("--quick", action="store_true", help="smoke run: K=20 and 200, 1 repeat")
    parser.add_argument("--profile", action="store_true", help="also cProfile the plait side")
    args = parser.parse_args(argv)
    ks = QUICK_KS if args.quick else KS
    repeats = 1 if args.quick else REPEATS

    print(
        f"agent loop, K scripted tool round-trips (sqlite {sqlite3.sqlite_version}, {PRAGMAS};"
        f" LangGraph SqliteSaver, durability='sync'); median of {repeats} after warm-up,"
        " fresh file per run; wall and process-CPU time:"
    )
    try:
        for module in ("langgraph.checkpoint.sqlite", "langgraph.prebuilt", "pydantic_ai"):
            importlib.import_module(module)
    except ImportError as exc:
        print(f"  {exc.name} is not installed: `make bench` installs the peers")
        return {}

    res = measure(ks, repeats)
    summary: dict[str, float] = {}
    for k in ks:
        report_k(res, k, summary)
    report_growth(res, ks, summary)
    report_targets(ks, summary)
    if args.profile:
        profile()
    return summary


def report_k(
    res: dict[str, dict[int, list[Sample] | int]], k: int, summary: dict[str, float]
) -> None:
    print(f"  K = {k} turns:")
    print(
        f"     {'':<26} {'wall us/turn':>12} {'(min .. max)':>21} {'CPU us/turn':>12}"
        f" {'bytes/turn':>11} {'file B/turn':>12}"
    )
    for name, by_k in res.items():
        got = by_k.get(k)
        if not isinstance(got, list):
            note = (
                f"stopped after {LANGGRAPH_CAP_S:.0f} s at turn {got} of {k}"
                if isinstance(got, int)
                else f"not run (a smaller K passed {LANGGRAPH_CAP_S:.0f} s)"
            )
            print(f"     {LABELS[name]:<26} {note}")
            continue
        wall = [s.elapsed / k * 1e6 for s in got]
        cpu = median(got, lambda s: s.cpu) / k * 1e6
        summary[f"{name}_us_{k}"] = statistics.median(wall)
        summary[f"{name}_cpu_us_{k}"] = cpu
        stored, suffix = "-", " (final history as JSON; nothing stored)"
        if got[0].stored is not None:
            summary[f"{name}_bytes_{k}"] = median(got, lambda s: s.stored or 0) / k
            stored, suffix = f"{summary[f'{name}_bytes_{k}']:,.0f}", ""
        print(
            f"     {LABELS[name]:<26} {statistics.median(wall):12,.0f}"
            f" ({min(wall):9,.0f} .. {max(wall):9,.0f}) {cpu:12,.0f} {stored:>11}"
            f" {median(got, lambda s: s.file or 0) / k:12,.0f}{suffix}"
        )
    if f"plait_us_{k}" not in summary:
        return
    parts = []
    for peer in ("langgraph", "pydantic-ai"):
        if f"{peer}_us_{k}" in summary:
            wall = summary[f"{peer}_us_{k}"] / summary[f"plait_us_{k}"]
            cpu = summary[f"{peer}_cpu_us_{k}"] / summary[f"plait_cpu_us_{k}"]
            summary[f"{peer}_over_plait_{k}"] = wall
            summary[f"{peer}_over_plait_cpu_{k}"] = cpu
            parts.append(f"{peer}/plait {wall:.2f}x wall, {cpu:.2f}x CPU")
    print(f"     ratios of the medians: {'; '.join(parts)}  (>1: plait is faster)")


def report_growth(
    res: dict[str, dict[int, list[Sample] | int]], ks: tuple[int, ...], summary: dict[str, float]
) -> None:
    print("  growth within one run: us/turn over the first -> the last 10% of turns (tool stamps):")
    for name, by_k in res.items():
        parts = []
        for k in ks:
            got = completed(by_k, k)
            if got is None:
                continue
            row = []
            for clock, label in ((CPU, "CPU"), (WALL, "wall")):
                first = median(got, lambda s, c=clock: window_us(s.stamps, c, True))
                last = median(got, lambda s, c=clock: window_us(s.stamps, c, False))
                row.append(f"{label} {first:,.0f} -> {last:,.0f} ({last / first:.2f}x)")
                summary[f"{name}_window_{label.lower()}_{k}"] = last / first
            parts.append(f"K={k}: " + ", ".join(row))
        print(f"     {LABELS[name]:<26} " + ("\n     " + " " * 27).join(parts))
    print(
        "  growth across sizes: marginal cost of the extra turns between two K"
        " -> against the average per turn of the smaller K:"
    )
    for name, by_k in res.items():
        sizes = [k for k in ks if completed(by_k, k) is not None]
        parts = []
        for small, large in itertools.pairwise(sizes):
            s_runs, l_runs = completed(by_k, small), completed(by_k, large)
            assert s_runs is not None and l_runs is not None
            row = []
            for of, label in ((lambda s: s.cpu, "CPU"), (lambda s: s.elapsed, "wall")):
                a, b = median(s_runs, of), median(l_runs, of)
                avg, marg = a / small * 1e6, (b - a) / (large - small) * 1e6
                row.append(f"{label} {avg:,.0f} -> {marg:,.0f} us/turn ({marg / avg:.2f}x)")
                summary[f"{name}_{label.lower()}_growth_{large}"] = marg / avg
            if s_runs[0].stored is not None:
                a = median(s_runs, lambda s: s.stored or 0)
                b = median(l_runs, lambda s: s.stored or 0)
                avg, marg = a / small, (b - a) / (large - small)
                row.append(f"bytes {avg:,.0f} -> {marg:,.0f} B/turn ({marg / avg:.2f}x)")
                summary[f"{name}_bytes_growth_{large}"] = marg / avg
            parts.append(f"K {small}->{large}: " + ", ".join(row))
        print(f"     {LABELS[name]:<26} " + (("\n     " + " " * 27).join(parts) or "-"))


def report_targets(ks: tuple[int, ...], summary: dict[str, float]) -> None:
    big = max(ks)
    print("  targets:")
    if f"pydantic-ai_us_{big}" in summary:
        ours, theirs = summary[f"plait_us_{big}"], summary[f"pydantic-ai_us_{big}"]
        cpu = summary[f"pydantic-ai_over_plait_cpu_{big}"]
        print(
            f"     durable plait no slower per turn than pydantic-ai (not durable), K={big}:"
            f" {ours:,.0f} vs {theirs:,.0f} us/turn wall ({theirs / ours:.2f}x; CPU {cpu:.2f}x):"
            f" {'met' if ours <= theirs else 'NOT met'}"
        )
    lg = [k for k in ks if f"langgraph_over_plait_{k}" in summary]
    if lg:
        k = max(lg)
        wall, cpu = summary[f"langgraph_over_plait_{k}"], summary[f"langgraph_over_plait_cpu_{k}"]
        print(
            f"     >= 5x faster than LangGraph + SqliteSaver, K={k}: {wall:.2f}x wall,"
            f" {cpu:.2f}x CPU: {'met' if min(wall, cpu) >= 5 else 'NOT met'}"
        )
    time_growth = summary.get(f"plait_cpu_growth_{big}")
    bytes_growth = summary.get(f"plait_bytes_growth_{big}")
    if time_growth is not None and bytes_growth is not None:
        flat = time_growth < FLAT and bytes_growth < FLAT
        print(
            f"     plait per turn flat up to K={big} (marginal/average < {FLAT}x): CPU"
            f" {time_growth:.2f}x, bytes {bytes_growth:.2f}x: {'met' if flat else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
