"""A run's result as the verbs that drive or show a run print it, and its exit code.

Apart from ``plait.cli.run`` so that ``plait show`` prints a run without importing the
driver that ``plait run`` needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from plait.cli.output import EXIT_FAILED, EXIT_OK, EXIT_PARKED, Output

if TYPE_CHECKING:
    from plait.driver.wave import RunResult


def status_exit(result: RunResult) -> int:
    if result.status == "completed":
        return EXIT_OK
    if result.status in ("parked", "running", "queued"):
        return EXIT_PARKED
    return EXIT_FAILED


def report(out: Output, result: RunResult) -> None:
    """Print a run's result and exit with the status's code."""
    if out.json_mode:
        out.data(result.to_json())
    else:
        describe(out, result)
    raise typer.Exit(status_exit(result))


OUTCOME_CODES = {"stalled": "E001", "budget_exhausted": "E007", "canceled": "E013"}
"""Run outcomes §13 gives a code (``--json`` carries the kind, as CONTRACT.md shows)."""


def describe(out: Output, result: RunResult) -> None:
    from rich.markup import escape  # a person's line, never built for --json

    colour = {"completed": "green", "parked": "yellow", "running": "yellow"}.get(
        result.status, "red"
    )
    out.say(f"run [bold]{escape(result.run_id)}[/]: [{colour}]{result.status}[/]", markup=True)
    outcome = result.to_json()["outcome"]
    if outcome and outcome["kind"] != "completed":
        details = [f"{k}={v}" for k, v in outcome.items() if k != "kind"]
        code = OUTCOME_CODES.get(outcome["kind"])
        if code is not None:
            details.insert(0, f"PLAIT-{code}")  # docs/errors.md explains it
        out.say(f"  outcome: {outcome['kind']} ({', '.join(details)})")
    spent = result.spent
    out.say(
        f"  spent: {spent.get('supersteps', 0)} supersteps, {spent.get('wall_ms', 0)} ms wall,"
        f" {spent.get('storage_bytes', 0)} bytes journaled"
    )
    for ask in result.asks:
        out.say(f"  waiting for: {ask.get('ask_id')} ({ask.get('prompt', '')})")
    if result.redelivered:
        out.say(f"  redelivered {result.redelivered} effect(s) that were in flight")
    from plait.core.canonical import dumps

    text = dumps(result.context)
    out.say(f"  context: {text if len(text) < 400 else text[:400] + '…'}")
