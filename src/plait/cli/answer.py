"""``plait asks``, ``respond``, ``approve``, ``deny``, ``send``, ``raise-budget``.

Verbs that journal what a human decides; none of them drives the run (``resume``
or a worker does). Each prints ``{"run_id", "accepted": true, ...}`` with --json.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from plait.cli.common import AsOption, CursorOption, DbOption, JsonOption, runtime
from plait.cli.output import EXIT_OK, Output, literal
from plait.core.errors import PlaitError
from plait.driver.verbs import accepted, asks_object, parse_budgets
from plait.driver.verbs import raise_budget as journal_raise

if TYPE_CHECKING:
    from rich.table import Table

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
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", metavar="N", help="The asks of N parked runs, longest waiting first."
        ),
    ] = None,
    cursor: CursorOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """List what waits for a human: the pending asks of one run, or of every parked run."""
    out = Output(json_output)
    paged = limit is not None or cursor is not None
    with out.reporting():
        if paged:
            _check_page(run_id, limit)
        with runtime(db, reading=True) as rt:
            if paged:
                from plait.driver.run_listing import asks_page_object  # a page: not for one run

                listed = asks_page_object(rt, limit, cursor, option="--cursor")
            else:
                listed = asks_object(rt, run_id)
    if json_output:
        out.data(listed)
        return
    found = listed["asks"]
    console = out.console()
    if not found:
        out.say("no pending asks")
    for i, ask in enumerate(found):
        if i:
            console.print()
        console.print(_ask_grid(ask))
    if listed.get("next_cursor"):
        out.say(f"more: plait asks --cursor {listed['next_cursor']}")


def _check_page(run_id: str | None, limit: int | None) -> None:
    """PLAIT-E019 for a page asked of one run's asks, or a limit out of range (before the
    store is opened)."""
    if run_id is not None:
        raise PlaitError(
            "E019", "--limit and --cursor page the asks of every parked run, not of one run"
        )
    if limit is not None:
        from plait.driver.run_listing import check_limit

        check_limit(limit, "--limit")


def _ask_grid(ask: dict[str, Any]) -> Table:
    """One ask as label/value rows. Ids get a line of their own and are never cut short:
    a 64-digit ask id is what ``respond``, ``approve`` and ``deny`` take, so it must copy whole.
    """
    from rich.table import Table  # a person's view, never built for --json

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("ask", literal(ask["ask_id"]))
    grid.add_row("run", literal(ask["run_id"]))
    grid.add_row("node", literal(ask["node"]))
    if ask.get("tool_name") is not None:
        grid.add_row("tool", literal(ask["tool_name"]))
    grid.add_row("prompt", literal(ask.get("prompt") or ""))
    grid.add_row("approval", "yes" if ask.get("approval") else "no")
    if ask.get("expires_at") is not None:
        grid.add_row("expires at", str(ask["expires_at"]))
    return grid


def respond(
    run_id: RunArg,
    ask_id: AskArg,
    result: Annotated[
        str | None, typer.Option("--result", help="The answer: JSON or @FILE.")
    ] = None,
    deny: Annotated[
        str | None,
        typer.Option("--deny", metavar="REASON", help="Refuse the ask with this reason."),
    ] = None,
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Answer an ask with --result JSON, or refuse it with --deny REASON."""
    out = Output(json_output)
    with out.reporting():
        if (result is None) == (deny is None):
            raise PlaitError("E019", "respond: give exactly one of --result JSON or --deny REASON")
        from plait.cli.inputs import parse_input  # not for ``plait asks``

        value = parse_input(result, "--result") if result is not None else None
        with runtime(db, principal) as rt:
            body = rt.respond(run_id, ask_id, value, deny=deny)
    _accepted(out, body, f"answer to {ask_id} accepted; `plait resume {run_id}` goes on")


def approve(
    run_id: RunArg,
    ask_id: AskArg,
    reason: Annotated[
        str | None, typer.Option("--reason", metavar="TEXT", help="Why (journaled).")
    ] = None,
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Approve an approval ask (the approver must not be the run's principal)."""
    out = Output(json_output)
    with out.reporting(), runtime(db, principal) as rt:
        body = rt.respond(run_id, ask_id, approve=True, reason=reason)
    _accepted(out, body, f"approved {ask_id}; `plait resume {run_id}` goes on")


def deny(
    run_id: RunArg,
    ask_id: AskArg,
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="Why (journaled; the model sees it).")
    ],
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Deny an approval ask."""
    out = Output(json_output)
    with out.reporting(), runtime(db, principal) as rt:
        body = rt.respond(run_id, ask_id, approve=False, reason=reason)
    _accepted(out, body, f"denied {ask_id}; `plait resume {run_id}` goes on")


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
