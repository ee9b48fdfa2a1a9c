"""What each role may do over HTTP: one table from route to the action it takes, one table
from role to the actions it grants (docs/security.md "Roles").

Roles are not a ladder: an operator starts and steers runs, an approver answers asks, and
neither may do the other's work, so a run's operator cannot also be the one who approves it
by holding a second role. An admin may do everything, including raising budgets and
managing tokens. Every role reads. A route missing from ``ROUTE_ACTIONS`` is an admin's
only (a new route is closed until someone decides who may call it; a test holds every
API route to the table).

Standard library only, like ``auth.py``.
"""

from __future__ import annotations

from plait.core.errors import PlaitError

ROLES = ("viewer", "operator", "approver", "admin")

READ = "read"
OPERATE = "operate"  # start, cancel, resume, send, fork, schedules
ANSWER = "answer"  # respond, approve, deny
ADMIN = "admin"  # raise budgets, tokens

GRANTS: dict[str, frozenset[str]] = {
    "viewer": frozenset({READ}),
    "operator": frozenset({READ, OPERATE}),
    "approver": frozenset({READ, ANSWER}),
    "admin": frozenset({READ, OPERATE, ANSWER, ADMIN}),
}

ROUTE_ACTIONS: dict[tuple[str, str], str] = {
    ("GET", "/me"): READ,
    ("GET", "/runs"): READ,
    ("GET", "/runs/{run_id}"): READ,
    ("GET", "/runs/{run_id}/trace"): READ,
    ("POST", "/runs/{run_id}/verify"): READ,
    ("GET", "/asks"): READ,
    ("GET", "/runs/{run_id}/asks"): READ,
    ("GET", "/runs/{run_id}/graph"): READ,
    ("GET", "/runs/{run_id}/events"): READ,
    ("GET", "/workflows/graph"): READ,
    ("GET", "/schedules"): READ,
    ("GET", "/runs/{run_id}/journal"): READ,
    ("GET", "/runs/{run_id}/drawing"): READ,
    ("GET", "/workflows/input"): READ,
    ("GET", "/conversations"): READ,
    ("GET", "/conversations/{conversation}"): READ,
    ("POST", "/conversations/{conversation}/turns"): OPERATE,
    ("POST", "/runs"): OPERATE,
    ("POST", "/runs/{run_id}/resume"): OPERATE,
    ("POST", "/runs/{run_id}/fork"): OPERATE,
    ("POST", "/runs/{run_id}/send"): OPERATE,
    ("POST", "/runs/{run_id}/cancel"): OPERATE,
    ("POST", "/schedules"): OPERATE,
    ("POST", "/schedules/sync"): OPERATE,
    ("POST", "/schedules/{name}/pause"): OPERATE,
    ("POST", "/schedules/{name}/resume"): OPERATE,
    ("DELETE", "/schedules/{name}"): OPERATE,
    ("POST", "/runs/{run_id}/asks/{ask_id}/respond"): ANSWER,
    ("POST", "/runs/{run_id}/asks/{ask_id}/approve"): ANSWER,
    ("POST", "/runs/{run_id}/asks/{ask_id}/deny"): ANSWER,
    ("POST", "/runs/{run_id}/raise-budget"): ADMIN,
}


def action_of(method: str, route_path: str) -> str:
    """The action a route takes (its path as declared, ``/runs/{run_id}``)."""
    return ROUTE_ACTIONS.get((method.upper(), route_path), ADMIN)


def role_problem(role: str) -> str | None:
    """Why ``role`` is not a role (None: it is one)."""
    if role in ROLES:
        return None
    return f"unknown role {role!r} (expected one of: {', '.join(ROLES)})"


def require(role: str, action: str, who: str) -> None:
    """PLAIT-E033 unless ``role`` grants ``action``; ``who`` names the caller."""
    if action not in GRANTS.get(role, frozenset()):
        allowed = [name for name in ROLES if action in GRANTS[name]]
        raise PlaitError(
            "E033",
            f"{who} has role '{role}', which may not {_VERBS[action]}"
            f" (roles that may: {', '.join(allowed)})",
        )


_VERBS = {
    READ: "read runs",
    OPERATE: "start, resume, fork, cancel or steer runs, or change schedules",
    ANSWER: "answer asks",
    ADMIN: "raise budgets or manage tokens",
}
