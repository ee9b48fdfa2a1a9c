"""``plait token``: per-principal API tokens for ``plait serve`` (docs/security.md).

``add`` makes a principal's token and shows it once (only its SHA-256 is stored);
``list`` shows who has one, with which role (never a token); ``revoke`` deletes one,
refused by a running server from its next request on (``plait.server.tokens``).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Annotated

import typer

from plait.cli.common import DbOption, JsonOption, runtime
from plait.cli.output import JsonUsageGroup, Output
from plait.server import tokens
from plait.server.roles import ROLES

token_app = typer.Typer(
    name="token",
    cls=JsonUsageGroup,
    help="API tokens of principals for `plait serve`, each with a role.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

PrincipalArgument = Annotated[
    str, typer.Argument(metavar="PRINCIPAL", help="Who the token acts as.")
]


@token_app.command("add")
def add(
    principal: PrincipalArgument,
    role: Annotated[
        str, typer.Option("--role", metavar="|".join(ROLES), help="What the token may do.")
    ],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Make PRINCIPAL's token (replacing one it had) and print it, once."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        made = tokens.add_token(rt.store, principal, role, rt.clock())
    if json_output:
        out.data(made)
        return
    sys.stderr.write(f"token of {made['principal']} (role {made['role']}); it is shown only now:\n")
    sys.stderr.flush()
    out.text(str(made["token"]))


@token_app.command("list")
def list_(db: DbOption = None, json_output: JsonOption = False) -> None:
    """List the principals that have a token, and their roles (never a token)."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        listed = tokens.list_tokens(rt.store)
    if json_output:
        out.data(listed)
        return
    lines = [
        f"{t['principal']}  {t['role']}  since "
        + datetime.fromtimestamp(t["created_ms"] / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
        for t in listed["tokens"]
    ]
    out.say("\n".join(lines) or "no tokens")


@token_app.command("revoke")
def revoke(
    principal: PrincipalArgument, db: DbOption = None, json_output: JsonOption = False
) -> None:
    """Delete PRINCIPAL's token: a running server refuses it from its next request on."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        revoked = tokens.revoke_token(rt.store, principal)
    if json_output:
        out.data(revoked)
    else:
        out.say(f"token of {principal} revoked")
