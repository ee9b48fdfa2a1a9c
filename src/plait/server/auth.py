"""Who is asking: the bearer token every API request carries, and the principal it acts as.

A server has one *trusted* token. ``plait serve --token T`` (or ``$PLAIT_SERVE_TOKEN``)
chooses it; with neither, a random one is generated and shown once. It is an admin's
token. Besides it, the store holds one token per principal (``plait token add``,
``server/tokens.py``), each with a role (``roles.py``). Tokens are compared in constant
time and never logged, printed (except a new one, once) or journaled.

The principal (who starts, cancels and answers) follows docs/architecture.md §8. A
principal's own token always acts as that principal: a request naming anyone else in
``as`` is refused (PLAIT-E033). The trusted token *bound* to a principal (``plait serve
--as P``) acts only as P (naming anyone else is PLAIT-E012); an *open* trusted token acts
as the principal a request names in its ``as`` field — trusted like the CLI's ``--as``
— else as the server's principal.

Standard library only: ``plait serve`` resolves its token before FastAPI is imported.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from plait.core.errors import PlaitError
from plait.server.roles import require
from plait.store.records import TokenRow

TOKEN_ENV = "PLAIT_SERVE_TOKEN"


def resolve_token(given: str | None, environ: Mapping[str, str]) -> tuple[str, bool]:
    """The server's token: ``--token``, else ``$PLAIT_SERVE_TOKEN``, else a new random one.

    Returns (token, generated); a blank value counts as absent.
    """
    for candidate in (given, environ.get(TOKEN_ENV)):
        if candidate is not None and candidate.strip():
            return candidate.strip(), False
    return secrets.token_urlsafe(32), True


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


@dataclass(frozen=True)
class Access:
    """The server's token and the principal its requests act as."""

    token: str
    principal: str
    bound: bool = False

    def __repr__(self) -> str:  # never show the token, even in a traceback
        return f"Access(principal={self.principal!r}, bound={self.bound})"

    def admits(self, authorization: str | None) -> bool:
        """Whether the header carries this server's token (constant-time comparison)."""
        given = bearer(authorization)
        if given is None:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    def check(self, authorization: str | None) -> None:
        """PLAIT-E029 unless the header carries this server's token."""
        if not self.admits(authorization):
            raise unauthenticated()

    def caller(self, authorization: str | None, lookup: Callable[[str], TokenRow | None]) -> Caller:
        """Who the header's token belongs to: this server's trusted token (an admin), else
        a principal's token ``lookup`` finds in the store; PLAIT-E029 for neither."""
        if self.admits(authorization):
            return Caller("admin", self.principal, self.bound, trusted=self)
        given = bearer(authorization)
        row = lookup(given) if given is not None else None
        if row is None:
            raise unauthenticated()
        return Caller(row.role, row.principal, True)

    def acting_as(self, requested: str | None) -> str:
        """The principal of a request that names ``requested`` (None: names nobody)."""
        if requested is not None and not requested.strip():
            requested = None
        if self.bound:
            if requested is not None and requested != self.principal:
                raise PlaitError(
                    "E012",
                    f"this token acts as '{self.principal}' and cannot act as '{requested}'",
                )
            return self.principal
        return requested if requested is not None else self.principal


def unauthenticated() -> PlaitError:
    return PlaitError(
        "E029",
        "this API needs an 'Authorization: Bearer <token>' header with the server's token"
        " or a token from 'plait token add'",
    )


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: a role, the principal it acts as when it names nobody,
    whether that principal is the only one it may act as, and — for the server's trusted
    token — its ``Access`` (which decides whom that token may name)."""

    role: str
    principal: str
    bound: bool
    trusted: Access | None = None

    def me(self) -> dict[str, str | None]:
        """``GET /me``: the principal (None for an open trusted token) and the role."""
        return {"principal": self.principal if self.bound else None, "role": self.role}

    def may(self, action: str) -> None:
        """PLAIT-E033 unless this caller's role grants ``action`` (``roles.py``)."""
        who = "the server's token" if self.trusted else f"the token of '{self.principal}'"
        require(self.role, action, who)

    def acting_as(self, requested: str | None) -> str:
        """The principal of a request that names ``requested`` (None: names nobody)."""
        if self.trusted is not None:
            return self.trusted.acting_as(requested)
        if requested is not None and requested.strip() and requested != self.principal:
            raise PlaitError(
                "E033",
                f"this token belongs to '{self.principal}' and cannot act as '{requested}'",
            )
        return self.principal
