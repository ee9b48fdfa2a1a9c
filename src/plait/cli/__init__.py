"""The ``plait`` command (CONTRACT.md "CLI"): one module per verb, listed in ``verbs``
and imported only when it runs.

Verbs print only through ``plait.cli.output``; a PlaitError becomes its report
and exit code there, never a traceback.
"""

from __future__ import annotations

import typer

from plait.cli.verbs import LazyVerbs

app = typer.Typer(
    name="plait",
    cls=LazyVerbs,
    help="Run AI agent workflows that survive crashes, waits and budgets.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _plait() -> None:
    """Run AI agent workflows that survive crashes, waits and budgets."""


def main() -> None:
    """The console-script entry point."""
    app()


__all__ = ["app", "main"]
