"""``plait conversations``: the conversations of a store (docs/chat.md)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from plait.cli.common import DbOption, JsonOption, runtime
from plait.cli.inspect import when
from plait.cli.output import Output, literal
from plait.driver.conversations import conversations as conversation_rows


def conversations(db: DbOption = None, json_output: JsonOption = False) -> None:
    """List conversations, latest update first: their runs, turns and last status."""
    out = Output(json_output)
    with out.reporting(), runtime(db, reading=True) as rt:
        rows: list[dict[str, Any]] = conversation_rows(rt.store)
    if json_output:
        out.data({"conversations": rows})
        return
    if not rows:
        out.say("no conversations")
        return
    table = Table()
    table.add_column("conversation", overflow="fold")
    table.add_column("turns")
    table.add_column("last run", overflow="fold")
    table.add_column("last status")
    table.add_column("updated (UTC)")
    for row in rows:
        table.add_row(
            literal(row["conversation"]),
            str(row["turns"]),
            literal(row["last_run_id"]),
            row["last_status"],
            when(row["updated_ms"]),
        )
    out.console().print(table)
