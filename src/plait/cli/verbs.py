"""The verbs of the ``plait`` command, each imported only when it runs.

A person typing ``plait runs`` waits for Python to import what ``runs`` needs, not the
driver, the executors and the server behind the other verbs (docs/benchmarks.md "CLI
start"). ``VERBS`` names each verb's module and function with the first paragraph of its
docstring, which is all ``plait --help`` shows; a test keeps the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

import typer
import typer.main
import typer.models
from typer.core import TyperCommand

from plait.cli.output import JsonUsageGroup

try:  # typer 0.29+ vendors click as typer._click
    from typer._click import Command, Context
except ImportError:  # earlier typers use click itself
    from click import Command, Context  # type: ignore[assignment]


@dataclass(frozen=True)
class Verb:
    name: str
    module: str
    attribute: str
    """A verb function, or a ``typer.Typer`` of sub-verbs (``schedule``)."""
    summary: str
    """The first paragraph of the function's docstring (the Typer's help)."""


VERBS = (
    Verb("run", "plait.cli.run", "run",
         "Start a run of WORKFLOW and drive it until it finishes or parks."),
    Verb("resume", "plait.cli.run", "resume",
         "Continue a run from its last checkpoint (a finished run reports its outcome again)."),
    Verb("cancel", "plait.cli.run", "cancel",
         "Cancel a run: journaled now, seen by the driver at its next step."),
    Verb("respond", "plait.cli.answer", "respond",
         "Answer an ask with --result JSON, or refuse it with --deny REASON."),
    Verb("approve", "plait.cli.answer", "approve",
         "Approve an approval ask (the approver must not be the run's principal)."),
    Verb("deny", "plait.cli.answer", "deny", "Deny an approval ask."),
    Verb("asks", "plait.cli.answer", "asks",
         "List what waits for a human: the pending asks of one run, or of every parked run."),
    Verb("send", "plait.cli.answer", "send",
         'Send a steering message; it reaches context["$inbox"] when the next superstep opens.'),
    Verb("raise-budget", "plait.cli.answer", "raise_budget",
         "Raise budget ceilings (journaled); `plait resume` continues at the refused turn."),
    Verb("fork", "plait.cli.run", "fork",
         "Start a new run from a checkpoint of RUN_ID (the base run is never touched)."),
    Verb("runs", "plait.cli.inspect", "runs",
         "List runs, newest first (a page of them with --limit, the filters or --sort)."),
    Verb("conversations", "plait.cli.conversations", "conversations",
         "List conversations, latest update first: their runs, turns and last status."),
    Verb("show", "plait.cli.inspect", "show",
         "Show where a run stands: status, outcome, spent, pending asks, context, and for a\n"
         "governed node in flight its active steps, allowed tools and why the others are"
         " blocked."),
    Verb("trace", "plait.cli.inspect", "trace", "Every effect of a run in dispatch order."),
    Verb("verify", "plait.cli.inspect", "verify",
         "Re-drive runs from their journals (no tool, no model) and compare every checkpoint."),
    Verb("graph", "plait.cli.graph", "graph", "Print the workflow as a Mermaid flowchart."),
    Verb("check", "plait.cli.check", "check",
         "Check a workflow file: one line per problem, FILE:LINE: PLAIT-Ennn message."),
    Verb("diff", "plait.cli.diff", "diff",
         "Compare two plans by meaning (files, or runs' pinned versions): exit 0 when equal."),
    Verb("migrate", "plait.cli.migrate", "migrate",
         "Move a parked, failed, stalled, budget-exhausted or canceled run onto a new version."),
    Verb("worker", "plait.cli.worker", "worker",
         "Claim runnable runs and drive them: queued, answered, due, or abandoned by a dead"
         " worker."),
    Verb("gc", "plait.cli.worker", "gc",
         "Delete finished runs not updated for DURATION (never parked, queued or running ones)."),
    Verb("serve", "plait.cli.serve", "serve",
         "Serve the HTTP API and the web console, and drive runs, until stopped (Ctrl-C)."),
    Verb("schedule", "plait.cli.schedule", "schedule_app",
         "Start runs of a workflow on a schedule (fired by workers)."),
    Verb("decide", "plait.cli.decide", "decide_app",
         "The decision backend (tool offer narrowing, guided folds)."),
    Verb("token", "plait.cli.token", "token_app",
         "API tokens of principals for `plait serve`, each with a role."),
)  # fmt: skip


def load(verb: Verb, *, rich_markup_mode: Any) -> Command:
    """The verb's real command (its options and arguments), importing its module now."""
    target = getattr(import_module(verb.module), verb.attribute)
    if isinstance(target, typer.Typer):
        return typer.main.get_command(target)
    info = typer.models.CommandInfo(name=verb.name, callback=target)
    return typer.main.get_command_from_info(
        info, pretty_exceptions_short=True, rich_markup_mode=rich_markup_mode
    )


class Stub(TyperCommand):
    """A verb not imported yet: its name and summary, for the list of verbs."""


class LazyVerbs(JsonUsageGroup):
    """The group of verbs: each starts as a stub holding its name and summary (enough for
    ``--help``, the list of verbs and "did you mean"); the one a command line names is
    replaced by its real command just before it is resolved."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for verb in VERBS:
            self.commands.setdefault(verb.name, Stub(verb.name, help=verb.summary))

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        if args:
            self.loaded(args[0])
        return super().resolve_command(ctx, args)

    def loaded(self, name: str) -> Command | None:
        """The real command of verb ``name`` (None for a name that is no verb)."""
        command = self.commands.get(name)
        if isinstance(command, Stub):
            verb = next(v for v in VERBS if v.name == name)
            command = load(verb, rich_markup_mode=self.rich_markup_mode)
            self.commands[name] = command
        return command
