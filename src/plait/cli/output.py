"""The one place the CLI prints (docs/architecture.md §12) and picks its exit code (CONTRACT.md).

With ``--json`` a verb prints exactly one JSON object on stdout, an error too,
and any human output goes to stderr. Without it, human output goes to stdout
when stdout is a terminal and to stderr otherwise, so pipes carry only data.
Verbs never print by themselves; they hand results and errors to ``Output``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import typer
from typer.core import TyperGroup

try:  # typer 0.29+ vendors click as typer._click, with its own Context and UsageError
    from typer._click import Context
    from typer._click.exceptions import UsageError
except ImportError:  # earlier typers use click itself
    from click import Context  # type: ignore[assignment]
    from click.exceptions import UsageError  # type: ignore[assignment]

from plait.core.canonical import dumps
from plait.core.errors import PlaitError
from plait.driver.error_json import error_object

if TYPE_CHECKING:  # rich is imported when a verb writes for a person, never for --json
    from rich.console import Console
    from rich.text import Text

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2
EXIT_PARKED = 3

RUN_OUTCOME_CODES = frozenset({"E001", "E007", "E009", "E013", "E024"})
"""Codes that describe how a run ended (exit 1); every other code is a refusal (exit 2)."""


def literal(value: object) -> Text:
    """A table cell shown exactly as it is: ids, prompts and results may hold ``[brackets]``
    that rich would otherwise read as markup (and fail on, or style and drop)."""
    from rich.text import Text

    return Text(str(value))


def exit_code(error: PlaitError) -> int:
    """The exit code for an error: 1 for a run outcome, 2 for load errors and refusals."""
    return EXIT_FAILED if error.code in RUN_OUTCOME_CODES else EXIT_REFUSED


@dataclass
class Output:
    """Where one invocation of a verb writes: JSON on stdout, or words for a human."""

    json_mode: bool
    _stdout: TextIO | None = field(default=None, init=False, repr=False)
    """The real stdout while ``reporting`` sends everything else's prints to stderr."""

    def console(self) -> Console:
        from rich.console import Console

        to_stderr = self.json_mode or not sys.stdout.isatty()
        return Console(stderr=to_stderr, soft_wrap=True, highlight=False)

    def say(self, text: str, *, markup: bool = False) -> None:
        """A line for a human (rich markup only when asked for: messages hold brackets)."""
        self.console().print(text, markup=markup)

    def data(self, obj: dict[str, Any]) -> None:
        """The one JSON object of a ``--json`` invocation."""
        stdout = self._stdout or sys.stdout
        stdout.write(dumps(obj) + "\n")
        stdout.flush()

    def text(self, text: str) -> None:
        """A verb's product as plain text on stdout (a Mermaid chart, say), never decorated."""
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()

    def fail(self, error: PlaitError) -> typer.Exit:
        """Report an error (each problem on its own line) and return the Exit to raise."""
        if self.json_mode:
            self.data(error_object(error))
        else:
            from rich.console import Console

            console = Console(stderr=True, soft_wrap=True, highlight=False)
            source = getattr(error, "source", None)
            lines = [problem.render(source) for problem in error.problems]
            lines += [w.render(source, warning=True) for w in getattr(error, "warnings", ())]
            for line in lines:
                console.print(line, markup=False)
        return typer.Exit(exit_code(error))

    @contextlib.contextmanager
    def reporting(self) -> Iterator[None]:
        """Turn a PlaitError raised inside into its report and exit code (no traceback).

        With ``--json``, whatever tools and libraries print while the verb works goes to
        stderr, so stdout carries the one JSON object and nothing else.
        """
        quiet = self.json_mode and self._stdout is None
        if quiet:
            self._stdout = sys.stdout
        try:
            with contextlib.redirect_stdout(sys.stderr) if quiet else contextlib.nullcontext():
                yield
        except PlaitError as exc:
            raise self.fail(exc) from None
        finally:
            if quiet:
                self._stdout = None


def wants_json(args: list[str]) -> bool:
    """Whether a command line asks for ``--json`` (before a ``--``, which ends options)."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


@contextlib.contextmanager
def usage_as_json(json_mode: bool) -> Iterator[None]:
    """With ``--json``, a command-line usage error is the JSON error object too (E019, exit 2)."""
    try:
        yield
    except UsageError as exc:
        if not json_mode:
            raise
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        raise Output(True).fail(PlaitError("E019", where + exc.format_message())) from None


class JsonUsageGroup(TyperGroup):
    """The group of verbs: an unknown verb or option, a missing argument or a bad value is
    reported as ``{"error": ...}`` when the command line asks for ``--json``."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Context | None = None,
        **extra: Any,
    ) -> Context:
        json_mode = wants_json(list(args))
        with usage_as_json(json_mode):
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        ctx.meta["plait.json"] = json_mode
        return ctx

    def invoke(self, ctx: Context) -> Any:
        with usage_as_json(bool(ctx.meta.get("plait.json"))):
            return super().invoke(ctx)
