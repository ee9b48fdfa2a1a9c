"""``plait asks``, ``respond``, ``approve``, ``deny``, ``send``, ``raise-budget``.

Verbs that journal what a human decides; none of them drives the run (``resume``
or a worker does). Each prints ``{"run_id", "accepted": true, ...}`` with --json.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from plait.cli.common import AsOption, DbOption, JsonOption, runtime
from plait.cli.output import EXIT_OK, Output
from plait.cli.run import parse_input
from plait.core.errors import PlaitError
from plait.driver.verbs import accepted, asks_object, parse_budgets
from plait.driver.verbs import raise_budget as journal_raise

RunArg = Annotated[str, typer.Argument(metavar="RUN_ID")]
AskArg = Annotated[str, typer.Argument(metavar="ASK_ID")]


def _accepted(out: Output, body: dict[str, Any], text: str) -> None:
    if out.json_mode:
        out.data(body)
    else:
        out.say(text)
    raise typer.Exit(EXIT_OK)


def asks(
    run_id: Annotated[str | None, typer.Argument(metavar="[RUN_ID]")] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """List what waits for a human: the pending asks of one run, or of every parked run."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        listed = asks_object(rt, run_id)
    if json_output:
        out.data(listed)
        return
    found = listed["asks"]
    table = Table("run", "ask id", "node", "prompt", "approval", "expires at")
    for ask in found:
        table.add_row(
            ask["run_id"],
            ask["ask_id"][:16] + "…",
            ask["node"],
            ask.get("prompt") or "",
            "yes" if ask.get("approval") else "",
            str(ask.get("expires_at") or ""),
        )
    out.console().print(table)


def respond(
    run_id: RunArg,
    ask_id: AskArg,
    result: Annotated[
        str | None, typer.Option("--result", help="The answer: JSON or @FILE.")
    ] = None,
    deny: Annotated[str | None, typer.Option("--deny", metavar="REASON")] = None,
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Answer an ask with --result JSON, or refuse it with --deny REASON."""
    out = Output(json_output)
    with out.reporting():
        if (result is None) == (deny is None):
            raise PlaitError("E019", "respond: give exactly one of --result JSON or --deny REASON")
        value = parse_input(result, "--result") if result is not None else None
        with runtime(db, principal) as rt:
            body = rt.respond(run_id, ask_id, value, deny=deny)
    _accepted(out, body, f"answer to {ask_id[:16]}… accepted; `plait resume {run_id}` goes on")


def approve(
    run_id: RunArg,
    ask_id: AskArg,
    reason: Annotated[str | None, typer.Option("--reason", metavar="TEXT")] = None,
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Approve an approval ask (the approver must not be the run's principal)."""
    out = Output(json_output)
    with out.reporting(), runtime(db, principal) as rt:
        body = rt.respond(run_id, ask_id, approve=True, reason=reason)
    _accepted(out, body, f"approved {ask_id[:16]}…; `plait resume {run_id}` goes on")


def deny(
    run_id: RunArg,
    ask_id: AskArg,
    reason: Annotated[str, typer.Option("--reason", metavar="TEXT")],
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Deny an approval ask."""
    out = Output(json_output)
    with out.reporting(), runtime(db, principal) as rt:
        body = rt.respond(run_id, ask_id, approve=False, reason=reason)
    _accepted(out, body, f"denied {ask_id[:16]}…; `plait resume {run_id}` goes on")


def send(
    run_id: RunArg,
    message: Annotated[str, typer.Argument(metavar="MESSAGE")],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Send a steering message; it reaches context["$inbox"] when the next superstep opens."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        rt.send(run_id, message)
    _accepted(out, accepted(run_id), f"message queued for {run_id}")


def raise_budget(
    run_id: RunArg,
    ceilings: Annotated[list[str], typer.Argument(metavar="AXIS=VALUE...")],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Raise budget ceilings (journaled); `plait resume` continues at the refused turn."""
    out = Output(json_output)
    with out.reporting():
        raised = parse_budgets(ceilings)
        with runtime(db) as rt:
            body = journal_raise(rt, run_id, raised)
    _accepted(out, body, f"budget raised for {run_id}: {raised}")
