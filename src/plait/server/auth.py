"""Who is asking: the bearer token every API request carries, and the principal it acts as.

A server has one token. ``plait serve --token T`` (or ``$PLAIT_SERVE_TOKEN``) chooses
it; with neither, a random one is generated and shown once. Tokens are compared in
constant time and never logged, printed (except a generated one, once) or journaled.

The principal (who starts, cancels and answers) follows docs/architecture.md §8. A token
*bound* to a principal (``plait serve --as P``) always acts as P: a request naming
anyone else is refused (PLAIT-E012), so an approval's separation of duties is an
authorization control. An *open* token acts as the principal a request names in its
``as`` field — trusted like the CLI's ``--as`` — else as the server's principal.

Standard library only: ``plait serve`` resolves its token before FastAPI is imported.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from plait.core.errors import PlaitError

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
            raise PlaitError(
                "E029",
                "this API needs an 'Authorization: Bearer <token>' header with the server's token",
            )

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
