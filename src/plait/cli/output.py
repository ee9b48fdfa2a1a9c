"""The one place the CLI prints (ARCHITECTURE.md §12) and picks its exit code (CONTRACT.md).

With ``--json`` a verb prints exactly one JSON object on stdout, an error too,
and any human output goes to stderr. Without it, human output goes to stdout
when stdout is a terminal and to stderr otherwise, so pipes carry only data.
Verbs never print by themselves; they hand results and errors to ``Output``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console

from plait.core.canonical import dumps
from plait.core.errors import PlaitError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2
EXIT_PARKED = 3

RUN_OUTCOME_CODES = frozenset({"E001", "E007", "E009", "E013", "E024"})
"""Codes that describe how a run ended (exit 1); every other code is a refusal (exit 2)."""


def exit_code(error: PlaitError) -> int:
    """The exit code for an error: 1 for a run outcome, 2 for load errors and refusals."""
    return EXIT_FAILED if error.code in RUN_OUTCOME_CODES else EXIT_REFUSED


def error_object(error: PlaitError) -> dict[str, Any]:
    """``{"error": {"code", "message", ...}}``; a load error also lists every problem."""
    body: dict[str, Any] = {"code": f"PLAIT-{error.code}", "message": error.detail}
    source = getattr(error, "source", None)
    if source is not None or len(error.problems) > 1:
        body["problems"] = [
            {"code": f"PLAIT-{p.code}", "message": p.message, "line": p.line}
            for p in error.problems
        ]
    if source is not None:
        body["file"] = source
    return {"error": body}


@dataclass(frozen=True)
class Output:
    """Where one invocation of a verb writes: JSON on stdout, or words for a human."""

    json_mode: bool

    def console(self) -> Console:
        to_stderr = self.json_mode or not sys.stdout.isatty()
        return Console(stderr=to_stderr, soft_wrap=True, highlight=False)

    def say(self, text: str, *, markup: bool = False) -> None:
        """A line for a human (rich markup only when asked for: messages hold brackets)."""
        self.console().print(text, markup=markup)

    def data(self, obj: dict[str, Any]) -> None:
        """The one JSON object of a ``--json`` invocation."""
        sys.stdout.write(dumps(obj) + "\n")
        sys.stdout.flush()

    def text(self, text: str) -> None:
        """A verb's product as plain text on stdout (a Mermaid chart, say), never decorated."""
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()

    def fail(self, error: PlaitError) -> typer.Exit:
        """Report an error (each problem on its own line) and return the Exit to raise."""
        if self.json_mode:
            self.data(error_object(error))
        else:
            console = Console(stderr=True, soft_wrap=True, highlight=False)
            source = getattr(error, "source", None)
            for problem in error.problems:
                console.print(problem.render(source), markup=False)
        return typer.Exit(exit_code(error))

    @contextlib.contextmanager
    def reporting(self) -> Iterator[None]:
        """Turn a PlaitError raised inside into its report and exit code (no traceback)."""
        try:
            yield
        except PlaitError as exc:
            raise self.fail(exc) from None
