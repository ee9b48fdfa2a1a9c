"""``plait runs``, ``show``, ``trace`` and ``verify``: verbs that read runs back."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Annotated, Any

import typer

from plait.cli.common import CursorOption, DbOption, JsonOption, runtime
from plait.cli.output import EXIT_FAILED, EXIT_OK, Output, literal
from plait.cli.results import describe, status_exit
from plait.core.canonical import dumps
from plait.core.errors import PlaitError
from plait.driver.verbs import (
    check_run_status,
    run_row,
    runs_object,
    show_object,
    trace_object,
    verify_report,
)


def runs(
    status: Annotated[
        str | None, typer.Option("--status", metavar="S", help="Only runs with this status.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", metavar="N", help="One page of at most N runs.")
    ] = None,
    workflow: Annotated[
        str | None, typer.Option("--workflow", metavar="NAME", help="Only this workflow's runs.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", metavar="WHEN", help="Only runs created since (ISO 8601, UTC by default)."
        ),
    ] = None,
    search: Annotated[
        str | None,
        typer.Option("--search", metavar="TEXT", help="Part of a run id, workflow or principal."),
    ] = None,
    cursor: CursorOption = None,
    sort: Annotated[
        str | None,
        typer.Option("--sort", metavar="BY", help="created (the default) or updated."),
    ] = None,
    order: Annotated[
        str | None,
        typer.Option("--order", metavar="ORDER", help="desc (newest first, the default) or asc."),
    ] = None,
    updated_since: Annotated[
        str | None,
        typer.Option(
            "--updated-since",
            metavar="WHEN",
            help="Only runs updated since (ISO 8601, UTC by default).",
        ),
    ] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """List runs, newest first (a page of them with --limit, the filters or --sort)."""
    out = Output(json_output)
    asked = (limit, workflow, since, search, cursor, sort, order, updated_since)
    paged = any(value is not None for value in asked)
    with out.reporting():
        from plait.driver.run_listing import (  # the pages of runs: not for show or trace
            DEFAULT_LIMIT,
            Filters,
            check_limit,
            check_sort,
            parse_since,
            runs_page_object,
        )

        check_run_status(status)  # before the store is opened (or created)
        since_ms = None if since is None else parse_since(since, "--since")
        updated_ms = (
            None if updated_since is None else parse_since(updated_since, "--updated-since")
        )
        if limit is not None:
            check_limit(limit, "--limit")
        check_sort(sort or "created", order or "desc", sort_option="--sort", order_option="--order")
        with runtime(db, reading=True) as rt:
            if paged:
                filters = Filters(
                    DEFAULT_LIMIT if limit is None else limit,
                    status,
                    workflow,
                    search,
                    since_ms,
                    cursor,
                    sort or "created",
                    order or "desc",
                    updated_ms,
                )
                listed = runs_page_object(rt, filters, run_row(rt))
            else:
                listed = runs_object(rt, status)
    rows: list[dict[str, Any]] = listed["runs"]
    if json_output:
        out.data(listed)
        return
    if not rows:
        out.say("no runs" + (f" with status {status}" if status else ""))
        return
    from rich.table import Table  # a person's table, never built for --json

    table = Table()
    # Ids are folded onto more lines when the terminal is narrow, never cut short.
    table.add_column("run", overflow="fold")
    table.add_column("workflow", overflow="fold")
    table.add_column("status")
    table.add_column("created (UTC)")
    table.add_column("updated (UTC)")
    for row in rows:
        table.add_row(
            literal(row["run_id"]),
            literal(row["workflow"]),
            row["status"],
            when(row["created_ms"]),
            when(row["updated_ms"]),
        )
    out.console().print(table)
    if listed.get("next_cursor"):
        out.say(f"more: plait runs ... --cursor {listed['next_cursor']}")


def when(ms: int) -> str:
    """A store time (ms since the epoch) as a date a person reads: ``2026-12-04 18:14:03``."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show where a run stands: status, outcome, spent, pending asks, context, and for a
    governed node in flight its active steps, allowed tools and why the others are blocked."""
    out = Output(json_output)
    with out.reporting(), runtime(db, reading=True) as rt:
        result, shown = show_object(rt, run_id)
    if json_output:
        out.data(shown)
    else:
        describe(out, result)
        if result.migrated_from:  # the chain of versions it lived on, oldest first
            chain = " -> ".join([*result.migrated_from, str(result.plan_hash)])
            out.say(f"  versions: {chain}")
        for path in shown.get("tool_code_changed", ()):
            out.say(
                f"  warning: tool module {path} changed since the run started (tool code is live)"
            )
        if "activity" in shown:
            out.say(f"  effects: {_activity_text(shown['activity'])}")
        for node_id, where in shown.get("governance", {}).items():
            _describe_flow(out, node_id, where)
    raise typer.Exit(status_exit(result))


def _activity_text(counted: dict[str, Any]) -> str:
    """``3 turns, 3 tool calls (lookup_order 1, unit_price 2), 570 in + 70 out tokens, $0.01``."""
    turns, calls = counted["turns"], counted["tool_calls"]
    text = f"{turns} turn{'s' if turns != 1 else ''}, {calls} tool call{'s' if calls != 1 else ''}"
    if counted["tools"]:
        text += " (" + ", ".join(f"{name} {n}" for name, n in counted["tools"].items()) + ")"
    text += f", {counted['input_tokens']} input + {counted['output_tokens']} output tokens"
    return text + f", ${counted['usd_micros'] / 1e6:.6f}"


def _describe_flow(out: Output, node_id: str, where: dict[str, Any]) -> None:
    """A governed node in flight, for a human: steps, tools, and why a tool is blocked."""
    mode = "" if where["mode"] == "enforce" else f" ({where['mode']} mode)"
    out.say(f"  governance of node '{node_id}'{mode}:")
    out.say(f"    active steps: {', '.join(where['active']) or '(none)'}")
    out.say(f"    done: {', '.join(where['done']) or '(none)'}")
    for step, guard in where["waiting_for"].items():
        out.say(f"    step '{step}' is done when {guard}")
    out.say(f"    allowed now: {', '.join(where['allowed']) or '(none)'}")
    for tool, why in where["blocked"].items():
        out.say(f"    blocked: {tool}: {why}")
    if where["missing_required"]:
        out.say(f"    required before a final answer: {', '.join(where['missing_required'])}")
    for posture in where["postures"]:
        out.say(f"    posture: {posture}")
    if where.get("refused"):
        out.say(f"    refused calls so far: {where['refused']}")
    for found in where.get("violations", ()):
        what = f"call to {found['tool']}" if found["tool"] is not None else "final answer"
        out.say(f"    violation ({found['rule']}): {what}: {found['why']}")


def trace(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Every effect of a run in dispatch order."""
    out = Output(json_output)
    with out.reporting(), runtime(db, reading=True) as rt:
        traced = trace_object(rt, run_id)
    if json_output:
        out.data(traced)
        return
    entries = traced["entries"]
    from rich.table import Table  # a person's table, never built for --json

    table = Table("step")
    table.add_column("node", overflow="fold")  # an id, never cut short
    for name in ("attempt", "seq", "kind"):
        table.add_column(name)
    table.add_column("status", no_wrap=True)
    table.add_column("what", overflow="fold", ratio=2)  # the tool called; a turn's calls or text
    table.add_column("result", ratio=1)
    table.add_column("redelivered", min_width=len("redelivered"))
    for e in entries:
        table.add_row(
            str(e["superstep"]),
            literal(e["node"] + (f" {e['task_path']}" if e["task_path"] else "")),
            str(e["attempt"]),
            str(e["effect_seq"]),
            e["kind"],
            e["status"],
            literal(_what_text(e)),
            literal(_outcome_text(e)),
            str(e["redeliveries"] or ""),
        )
    out.console().print(table)
    for e in entries:  # observe mode: what enforce mode would have refused
        for v in e.get("violations", ()):
            what = f"call {v['tool']} ({v['tool_call_id']})" if v["tool"] else "final answer"
            out.say(
                f"violation at step {e['superstep']}, node {e['node']}, turn {e['effect_seq']}:"
                f" {what}: {v['rule']}: {v['reason']}"
            )


def _what_text(entry: dict[str, Any]) -> str:
    """What an entry did: the tool it called, or the calls or text of a model turn."""
    if entry["kind"] == "tool":
        return str(entry.get("tool") or "")
    if entry["kind"] == "decide":  # a question to the decision backend (docs/decide.md)
        asked = entry.get("input")
        question: dict[str, Any] = asked if isinstance(asked, dict) else {}
        items = question.get("items") or ()
        noun = "tools" if question.get("purpose") == "offer" else "tool pairs"
        return f"scores {len(items)} {noun} ({question.get('purpose')})"
    if entry.get("calls"):
        return "calls " + ", ".join(str(name) for name in entry["calls"])
    text = entry.get("text")
    if isinstance(text, str) and text:
        one_line = " ".join(text.split())
        return "says " + (one_line if len(one_line) <= 60 else one_line[:60] + "…")
    return ""


def _outcome_text(entry: dict[str, Any]) -> str:
    """A trace entry's result (or failure) in a line of at most 60 characters."""
    if "failure" in entry:
        failure = entry["failure"]
        text = f"{failure.get('cause')}: {failure.get('detail')}"
    elif entry["kind"] == "llm" and entry.get("result") is not None:
        usage = entry.get("usage") or {}  # the turn itself is under "what"
        return f"{usage.get('input_tokens', 0)} in + {usage.get('output_tokens', 0)} out tokens"
    elif entry.get("result") is not None:
        text = dumps(entry["result"])
    else:
        return ""
    return text if len(text) <= 60 else text[:60] + "…"


def verify(
    run_ids: Annotated[list[str] | None, typer.Argument(metavar="RUN_ID...")] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Verify every run in the store.")] = False,
    workflow: Annotated[
        str | None,
        typer.Option(
            "--workflow",
            metavar="FILE",
            help="Replay against this version of the plan instead of the one each run pinned.",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            metavar="N",
            min=1,
            help="Processes one long run's replay may be split over (default: every core).",
        ),
    ] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Re-drive runs from their journals (no tool, no model) and compare every checkpoint."""
    out = Output(json_output)
    with out.reporting(), runtime(db, reading=True) as rt:
        against = None
        if workflow is not None:
            from plait.workflow import load_workflow
            from plait.workflow.run_definition import definition_of

            against = definition_of(load_workflow(workflow))
        if all_runs:
            ids = [i.run_id for i in rt.store.list_runs()]
        elif run_ids:
            ids = list(run_ids)
        else:
            raise PlaitError("E019", "verify: give one or more RUN_IDs, or --all")

        def here(run_id: str) -> dict[str, Any]:
            return verify_report(rt, run_id, against, workers)

        def verify_ids(advance: Callable[[int], None]) -> list[dict[str, Any]]:
            if all_runs:  # every core once it pays (plait.cli.verify_all)
                from plait.cli.verify_all import verify_all

                return verify_all(rt.db, ids, workflow, here, advance)
            return [here(run_id) for run_id in ids]

        if all_runs and not json_output:
            from rich.progress import Progress

            with Progress(console=out.console()) as bar:
                task = bar.add_task("verifying", total=len(ids))
                reports = verify_ids(lambda done: bar.advance(task, done))
        else:
            reports = verify_ids(lambda done: None)
    failed = sum(1 for r in reports if not r["verified"])
    if json_output:
        if len(reports) == 1 and not all_runs:
            out.data(reports[0])
        else:
            out.data({"runs": reports, "verified": len(reports) - failed, "failed": failed})
    else:
        from rich.markup import escape  # a person's lines, never built for --json

        for r in reports:
            if r["verified"]:
                word = "identical" if against is not None else "verified"
                out.say(
                    f"[green]{word}[/] {escape(r['run_id'])}: {r['checkpoints']} checkpoints,"
                    f" up to {r['up_to']}",
                    markup=True,
                )
                if "note" in r:  # what could not be checked (a fork whose base is gone)
                    out.say(f"  note: {r['note']}")
            elif "diverged_at" in r and against is not None:
                at = r["diverged_at"]
                node = f", node {at['node']}" if at["node"] is not None else ""
                out.say(
                    f"DIVERGED {r['run_id']} at superstep {at['superstep']}{node}: {at['what']}"
                )
            else:
                out.say(f"FAILED {r['run_id']}: {r['error']}")
    raise typer.Exit(EXIT_FAILED if failed else EXIT_OK)
