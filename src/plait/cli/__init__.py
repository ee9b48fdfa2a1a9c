"""The ``plait`` command (CONTRACT.md "CLI"): one module per verb, registered here.

Verbs print only through ``plait.cli.output``; a PlaitError becomes its report
and exit code there, never a traceback.
"""

from __future__ import annotations

import typer

from plait.cli.answer import approve, asks, deny, raise_budget, respond, send
from plait.cli.check import check
from plait.cli.decide import decide_app
from plait.cli.diff import diff
from plait.cli.graph import graph
from plait.cli.inspect import runs, show, trace, verify
from plait.cli.migrate import migrate
from plait.cli.output import JsonUsageGroup
from plait.cli.run import cancel, fork, resume, run
from plait.cli.schedule import schedule_app
from plait.cli.serve import serve
from plait.cli.worker import gc, worker

app = typer.Typer(
    name="plait",
    cls=JsonUsageGroup,
    help="Run AI agent workflows that survive crashes, waits and budgets.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _plait() -> None:
    """Run AI agent workflows that survive crashes, waits and budgets."""


app.command("run")(run)
app.command("resume")(resume)
app.command("cancel")(cancel)
app.command("respond")(respond)
app.command("approve")(approve)
app.command("deny")(deny)
app.command("asks")(asks)
app.command("send")(send)
app.command("raise-budget")(raise_budget)
app.command("fork")(fork)
app.command("runs")(runs)
app.command("show")(show)
app.command("trace")(trace)
app.command("verify")(verify)
app.command("graph")(graph)
app.command("check")(check)
app.command("diff")(diff)
app.command("migrate")(migrate)
app.command("worker")(worker)
app.command("gc")(gc)
app.command("serve")(serve)
app.add_typer(schedule_app, name="schedule")
app.add_typer(decide_app, name="decide")


def main() -> None:
    """The console-script entry point."""
    app()


__all__ = ["app", "main"]
