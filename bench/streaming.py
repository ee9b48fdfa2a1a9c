"""Streaming: time to the first delta against the provider's own latency (issue #18 part 1).

A fake provider on loopback (``tests/support/fake_provider.py``, the one the tests use)
answers one turn of ``PIECES`` text pieces with a fixed delay before its first byte
(``first_byte_s``) and between two pieces (``chunk_s``); a plain (non-streamed) answer
waits for all its pieces before it is sent, as a provider generating the whole answer does.
Each measurement is one durable run of a one-node workflow on a fresh SQLite file
(``Runtime.start`` on ``openai-compatible:<fake>``), timed from the call to ``start``:

- **request**: when the request reached the provider (the run's start: store, manifest,
  pinning, the SDK client);
- **first delta** (streamed, ``Runtime(deltas=...)``): when the first text piece reached
  the observer; *stream path* is first delta − request − first byte: what plait and
  the SDK add between the provider sending its first piece and the observer having it;
- **streamed / plain answer**: when the run completed, streamed and not.

Reported: the median of ``--repeats`` runs (after a warm-up) per provider latency.

    .venv/bin/python bench/streaming.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from plait.driver.deltas import TurnDelta
from plait.driver.runtime import Runtime
from plait.workflow import load_workflow
from support.fake_provider import Answer, FakeProvider

PIECES = 20
CHUNK_S = 0.02
LATENCIES_S = (0.0, 0.05, 0.2, 0.5)


def one_run(
    folder: Path, provider: FakeProvider, n: int, streamed: bool
) -> tuple[float, float, float]:
    """Seconds to the request, to the first delta (nan when not streamed), to completion."""
    llm = {"model": provider.openai_spec, "max_retries": 0}
    flow = folder / "greet.yaml"
    flow.write_text(
        f"name: greet\nnodes: [{{id: agent, instruction: Hi.}}]\nllm: {json.dumps(llm)}\n"
    )
    first: list[float] = []
    t0 = time.perf_counter()

    def on_delta(delta: TurnDelta) -> None:
        if not first:
            first.append(time.perf_counter() - t0)

    db = f"sqlite:///{folder}/run{n}.db"
    with Runtime(db, deltas=on_delta if streamed else None, telemetry=False) as rt:
        t0 = time.perf_counter()
        result = asyncio.run(rt.start(load_workflow(str(flow)), None, run_id="r"))
        done = time.perf_counter() - t0
    assert result.status == "completed", result.to_json()
    return provider.arrivals[-1] - t0, (first[0] if first else float("nan")), done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two latencies, 3 repeats")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    latencies = LATENCIES_S[:2] if args.quick else LATENCIES_S
    repeats = 3 if args.quick else args.repeats
    pieces = tuple(f"word{i} " for i in range(PIECES))
    print(
        f"one turn of {PIECES} pieces, {CHUNK_S * 1000:.0f} ms between pieces;"
        f" median of {repeats} runs (ms)"
    )
    print("| first byte | request | first delta | stream path | streamed answer | plain answer |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        n = 0
        for latency in latencies:
            provider = FakeProvider([Answer(pieces)], first_byte_s=latency, chunk_s=CHUNK_S)
            provider.start()
            try:
                rows: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
                for repeat in range(repeats + 1):  # the first is a warm-up
                    for streamed in (True, False):
                        n += 1
                        timing = one_run(folder, provider, n, streamed)
                        if repeat:
                            rows[streamed].append(timing)
            finally:
                provider.close()
            sent = statistics.median(t[0] for t in rows[True]) * 1000
            first = statistics.median(t[1] for t in rows[True]) * 1000
            path = statistics.median(t[1] - t[0] - latency for t in rows[True]) * 1000
            streamed_done = statistics.median(t[2] for t in rows[True]) * 1000
            plain_done = statistics.median(t[2] for t in rows[False]) * 1000
            print(
                f"| {latency * 1000:.0f} | {sent:.1f} | {first:.1f} | {path:.1f} |"
                f" {streamed_done:.1f} | {plain_done:.1f} |"
            )


if __name__ == "__main__":
    main()
