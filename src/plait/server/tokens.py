"""Per-principal API tokens (``plait token add|list|revoke``): made here, kept as digests.

A token is 32 random bytes (``secrets``), URL-safe, prefixed ``plait_`` so a leaked one is
recognisable. The store keeps only its SHA-256: a token has 256 bits of entropy, so a
fast hash is as strong as a slow one against guessing, and a request's token is found by
its digest in one indexed read; the digest found is compared again in constant time.
The token is shown once, when made, and never journaled or logged.

Standard library and the store only: the CLI uses this module without FastAPI.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from plait.core.errors import PlaitError
from plait.driver.run_ids import check_principal
from plait.server.roles import role_problem
from plait.store.base import Store, TokenStore
from plait.store.records import TokenRow

PREFIX = "plait_"


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def tokens_of(store: Store) -> TokenStore:
    """The store's tokens; PLAIT-E020 for a store that keeps none (a custom one)."""
    if not isinstance(store, TokenStore):
        raise PlaitError("E020", f"storage error: {type(store).__name__} keeps no API tokens")
    return store


def add_token(store: Store, principal: str, role: str, now_ms: int) -> dict[str, Any]:
    """Make ``principal``'s token (replacing one it had): ``{"principal", "role", "token"}``,
    the one time the token is shown."""
    problem = role_problem(role)
    if problem is not None:
        raise PlaitError("E019", f"--role: {problem}")
    principal = check_principal(principal)
    token = new_token()
    tokens_of(store).put_token(TokenRow(principal, role, token_digest(token), now_ms))
    return {"principal": principal, "role": role, "token": token}


def list_tokens(store: Store) -> dict[str, Any]:
    """``{"tokens": [{"principal", "role", "created_ms"}]}``: never a token or its digest."""
    rows = tokens_of(store).list_tokens()
    return {
        "tokens": [
            {"principal": r.principal, "role": r.role, "created_ms": r.created_ms} for r in rows
        ]
    }


def revoke_token(store: Store, principal: str) -> dict[str, Any]:
    """Delete the principal's token: refused from the next request on; PLAIT-E017 when
    the principal has none."""
    if not tokens_of(store).revoke_token(principal):
        raise PlaitError("E017", f"principal '{principal}' has no token")
    return {"principal": principal, "revoked": True}


def find_token(store: Store, token: str) -> TokenRow | None:
    """The row of the principal whose token ``token`` is, or None."""
    digest = token_digest(token)
    row = tokens_of(store).token_by_digest(digest)
    if row is None or not hmac.compare_digest(row.digest, digest):
        return None
    return row
