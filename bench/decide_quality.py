"""The local decision backend on the quality set (issue #21): recall and precision of the
narrowed offer, prompt tokens saved per turn, decide latency and the model's load time.

The set is ``bench/decide_data/`` (``generate.py`` writes it: a 50-tool catalogue of a
support desk, devops, CRM and files, and labelled instructions). For each K the offer is
the top K tools (``min_p`` 0), as ``llm.decide.offer: {max_tools: K}`` makes it; then the
threshold is calibrated as ``plait decide calibrate`` does (four fifths fit, one fifth
held out). Prompt tokens: the tool definitions a turn sends in OpenAI's ``tools`` shape,
counted as characters / 4 (the usual estimate; plait has no provider tokenizer), for the
whole catalogue against the mean narrowed offer plus ``more_tools``.

    .venv/bin/python bench/decide_quality.py [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from plait.core.decide import MORE_TOOLS, MORE_TOOLS_DESCRIPTION
from plait.decide.calibration import calibrate, load_examples, measure, score_examples
from plait.decide.local import LocalBackend

DATA = Path(__file__).resolve().parent / "decide_data"
KS = (3, 5, 6, 8, 10)


def tool_tokens(tools: list[dict]) -> int:
    """A turn's tool definitions in OpenAI's shape, as characters / 4."""
    shaped = [
        {"type": "function", "function": {
            "name": t["name"], "description": t["description"], "parameters": t["input_schema"],
        }}
        for t in tools
    ]  # fmt: skip
    return round(len(json.dumps(shaped)) / 4)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    backend = LocalBackend()  # not the cached one: the load is measured
    load_ms = (time.perf_counter() - started) * 1000
    examples = load_examples(DATA / "examples.jsonl")
    catalogue = examples[0]["tools"]
    # one question per example, the catalogue embedded once (cached) as in a run's process
    latencies = []
    for example in examples[:1]:  # the first question pays for the catalogue
        t0 = time.perf_counter()
        asyncio.run(score_examples(backend, [example]))
        first_ms = (time.perf_counter() - t0) * 1000
    scored = []
    for example in examples:
        t0 = time.perf_counter()
        scored += asyncio.run(score_examples(backend, [example]))
        latencies.append((time.perf_counter() - t0) * 1000)
    more = {"name": MORE_TOOLS, "description": MORE_TOOLS_DESCRIPTION,
            "input_schema": {"type": "object", "properties": {}}}  # fmt: skip
    full_tokens = tool_tokens(catalogue)
    by_k = {}
    for k in KS:
        quality = measure(scored, k, 0.0)
        picked = [sorted(range(len(s)), key=lambda i, s=s: (-s[i], i))[:k] for s, _ in scored]
        narrowed = statistics.mean(tool_tokens([catalogue[i] for i in p] + [more]) for p in picked)
        by_k[k] = {**quality, "tool_tokens_per_turn": round(narrowed),
                   "saved_per_turn": round(full_tokens - narrowed)}  # fmt: skip
    report = {
        "examples": len(examples),
        "catalogue_tools": len(catalogue),
        "model": backend.model,
        "load_ms": round(load_ms),
        "first_question_ms": round(first_ms),
        "question_ms_median": round(statistics.median(latencies), 1),
        "question_ms_p95": round(sorted(latencies)[int(len(latencies) * 0.95)], 1),
        "full_catalogue_tool_tokens_per_turn": full_tokens,
        "by_k": by_k,
        "calibrated_k8": calibrate(scored, 8, "local", backend.model),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['examples']} examples, {len(catalogue)} tools, model {backend.model}")
    print(f"model load {report['load_ms']} ms; first question {report['first_question_ms']} ms"
          f" (embeds the catalogue); then median {report['question_ms_median']} ms,"
          f" p95 {report['question_ms_p95']} ms per question (CPU, 1 thread)")  # fmt: skip
    print(f"tool definitions per turn, all 50 tools: ~{full_tokens} tokens")
    print(" K  recall  precision  tokens/turn  saved/turn")
    for k, row in by_k.items():
        print(f"{k:2}  {row['recall']:.4f}  {row['precision']:.4f}     "
              f"{row['tool_tokens_per_turn']:6}      {row['saved_per_turn']:6}")  # fmt: skip
    cal = report["calibrated_k8"]
    print(f"calibrated at K=8: threshold {cal['threshold']}, held-out"
          f" precision {cal['held_out']['precision']} recall {cal['held_out']['recall']}"
          f" (mean offer {cal['held_out']['mean_offered']} tools)")  # fmt: skip


if __name__ == "__main__":
    main()
