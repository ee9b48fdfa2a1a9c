"""The error catalogue (docs/architecture.md §13): one stable code per kind of problem.

Codes are append-only: a code is never reused or renumbered. Every error a user
can meet leads its message with its code, so ``PLAIT-E019`` is searchable in
docs/errors.md. One exception type carries them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CATALOGUE: dict[str, str] = {
    "E001": "stalled: the run drained without reaching a final node",
    "E002": "unbounded cycle: a cycle has no edge with max_cycles",
    "E003": "unreachable node: not reachable from the entry",
    "E004": "unresolved tool or reference",
    "E005": "invalid condition",
    "E006": "abstract node without a model",
    "E007": "budget exhausted",
    "E008": "dangling intent on resume with on_dangling: fail",
    "E009": "replay divergence",
    "E010": "manifest or checkpoint mismatch",
    "E011": "unknown, settled or expired ask",
    "E012": "unauthorized (self-approval)",
    "E013": "canceled",
    "E015": "checkpoint too large",
    "E016": "tainted (duplicate run id)",
    "E017": "unknown run id",
    "E019": "invalid workflow file",
    "E020": "storage error",
    "E021": "lease lost",
    "E024": "context exceeded",
    "E025": "model mismatch",
    "E026": "engine epoch mismatch",
    "E027": "invalid governance flow",
    "E028": "invalid answer",
    "E029": "unauthenticated (HTTP API: missing or wrong bearer token)",
    "E030": "migration refused",
    "E031": "conversation refused",
    "E032": "content part refused (unknown media type, not base64, or too large)",
    "E033": "forbidden (HTTP API: the token's role or principal may not do this)",
    "E034": "outside the served workflows folder (HTTP API: a path the server may not open)",
    "E035": "model override refused (HTTP API: not admitted by --allow-model)",
    "E037": "decision backend unavailable (not installed or not readable here)",
    "E038": "invalid calibration file",
}


class PlaitError(Exception):
    """An error with a ``PLAIT-Ennn`` code; ``problems`` lists every problem found.

    The message is the first problem's line; the others ride along so a load
    reports everything wrong with a file at once.
    """

    def __init__(self, code: str, message: str, problems: Sequence[Problem] = ()) -> None:
        if code not in CATALOGUE:
            raise ValueError(f"unknown error code {code}")
        self.code = code
        self.detail = message
        self.problems: tuple[Problem, ...] = tuple(problems) or (Problem(code, message),)
        super().__init__(f"PLAIT-{code} {message}")

    @classmethod
    def from_problems(cls, problems: Sequence[Problem]) -> PlaitError:
        """One error carrying every problem, coded and worded by the first."""
        first = problems[0]
        return cls(first.code, first.message, problems)


@dataclass(frozen=True)
class Problem:
    """One problem found while loading: its code, its message, and where it is.

    ``node`` / ``edge`` (an edge index) let a file loader map the problem back to
    a line of the file; ``line`` is filled in by that loader.
    """

    code: str
    message: str
    line: int | None = None
    node: str | None = None
    edge: int | None = None

    def render(self, source: str | None = None, *, warning: bool = False) -> str:
        """``FILE:LINE: PLAIT-Ennn message`` (file and line when known); a warning's
        message starts ``warning:``."""
        where = ""
        if source is not None:
            where = f"{source}:{self.line}: " if self.line is not None else f"{source}: "
        return f"{where}PLAIT-{self.code} {'warning: ' if warning else ''}{self.message}"
