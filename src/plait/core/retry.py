"""Retry policies with durable backoff (docs/architecture.md §3.5b).

Rules of this file:
- It never reads a clock or randomness. The wait after a failure is a pure function of
  the policy, how many attempts failed, and the failed effect's call id: the jitter is
  drawn from SHA-256 of that id (which names the run), so a replay draws the same.
- A wait is a durable timer: a pending entry with a wake time (``PendingAsk`` with
  ``backoff``) and a ``timer`` intent, settled by the driver like a timer node's. Only
  when it elapses does the retry run, so a run waiting on it parks like any other.
- A workflow without ``retry:`` never reaches the waiting half: ``retries: k`` is the
  policy of k+1 attempts with no wait, retried at once as it always was.

Theory of operation. ``policy_of`` names a node's policy (its own ``retry:``, pinned in
the manifest, else the ``retries`` shorthand). When an effect fails, ``allows`` says
whether another attempt may follow: attempts left, a cause the retry table allows for
its kind (``retryable``), and neither its exception class nor its cause named in
``non_retryable``. ``delay_ms`` is ``initial * multiplier^(n-1)`` after the n-th failure,
capped at ``max``, less a jitter fraction of itself. ``wait`` registers the timer; the
step hands its elapsing back to whoever registered it (``PendingAsk.backoff`` names it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from plait.core.asks import TIMER_EXECUTOR, journal_only
from plait.core.keys import JournalKey, call_id
from plait.core.machine import StepContext
from plait.core.outcomes import Failed, retryable
from plait.core.pending import PendingAsk
from plait.core.state import OpenPhase

MAX_DELAY_MS = 10**18
"""The longest wait: added to any clock reading it still fits a 64-bit integer."""
JITTER_SCALE = 1_000_000
"""Jitter is kept in millionths, so drawing it is integer arithmetic only."""
_JITTER_PREFIX = b"plait-retry-jitter\x00"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often an effect may be tried and how long to wait between tries, in core units."""

    max_attempts: int = 1
    """Attempts in all, the first one included."""
    initial_ms: int = 0
    """The wait after the first failure; 0 retries at once (the ``retries: k`` shorthand)."""
    multiplier: Fraction = Fraction(2)
    max_ms: int | None = None
    jitter_ppm: int = 0
    """Up to this many millionths of a wait are taken off it (0: no jitter)."""
    non_retryable: frozenset[str] = frozenset()
    """Exception class names (or failure causes) that are never retried."""

    @property
    def waits(self) -> bool:
        return self.initial_ms > 0

    @staticmethod
    def shorthand(retries: int) -> RetryPolicy:
        """``retries: k``: k re-attempts, each at once."""
        return RetryPolicy(max_attempts=retries + 1)

    @staticmethod
    def from_manifest(value: Mapping[str, Any]) -> RetryPolicy:
        """A node's pinned ``retry`` (file units, defaults filled in) in core units."""
        max_s = value.get("max_s")
        return RetryPolicy(
            max_attempts=int(value["max_attempts"]),
            initial_ms=_scaled(value["initial_s"], 1000),
            multiplier=Fraction(str(value["multiplier"])),
            max_ms=None if max_s is None else _scaled(max_s, 1000),
            jitter_ppm=_scaled(value["jitter"], JITTER_SCALE),
            non_retryable=frozenset(str(name) for name in value.get("non_retryable", ())),
        )

    def allows(self, failed_attempts: int, outcome: Failed, kind: str) -> bool:
        """Whether another attempt may follow the ``failed_attempts``-th failure."""
        if failed_attempts >= self.max_attempts or not retryable(outcome.cause, kind):
            return False
        return not self.refuses(outcome)

    def refuses(self, outcome: Failed) -> bool:
        """The failure is one ``non_retryable`` names: by exception class, or by cause."""
        named = self.non_retryable
        return bool(named) and (outcome.error in named or outcome.cause in named)


def _scaled(value: Any, scale: int) -> int:
    """A file number times ``scale``, rounded half-up on its decimal text (as budgets are)."""
    exact = Fraction(str(value)) * scale
    return int(exact + Fraction(1, 2)) if exact >= 0 else -int(-exact + Fraction(1, 2))


def delay_ms(policy: RetryPolicy, failed_attempts: int, failed: JournalKey) -> int:
    """The wait after the ``failed_attempts``-th failure, the one of effect ``failed``.

    Exact rational arithmetic, then whole milliseconds: the same on every machine."""
    if not policy.waits or failed_attempts < 1:
        return 0
    cap = MAX_DELAY_MS if policy.max_ms is None else min(policy.max_ms, MAX_DELAY_MS)
    base = Fraction(policy.initial_ms)
    for _ in range(failed_attempts - 1):
        if base >= cap:
            break
        base *= policy.multiplier
    whole = int(min(base, Fraction(cap)))
    if policy.jitter_ppm:
        draw = int.from_bytes(
            hashlib.sha256(_JITTER_PREFIX + call_id(failed).encode()).digest()[:8]
        )
        whole -= whole * policy.jitter_ppm * draw // (JITTER_SCALE * 2**64)
    return whole


def policy_of(s: StepContext, node: int) -> RetryPolicy:
    """The node's pinned policy, else its ``retries`` shorthand."""
    policy = s.env.retry_policies.get(node)
    return policy if policy is not None else RetryPolicy.shorthand(s.env.plan.nodes[node].retries)


def wait(
    s: StepContext,
    phase: OpenPhase,
    timer: JournalKey,
    node: int,
    delay: int,
    *,
    failed: JournalKey,
    failed_attempts: int,
) -> None:
    """Register the wait before the next attempt as a durable timer at ``timer``.

    Its intent says which effect failed and how long it waits: what ``plait trace`` and
    a reader of the journal see of the backoff."""
    state = s.state
    wake_ms = state.clock_ms + delay
    state.pending_asks[call_id(timer)] = PendingAsk(timer, node, wake_ms=wake_ms, backoff=True)
    value = {
        "wake_ms": wake_ms,
        "backoff_ms": delay,
        "retry_of": failed.to_json(),
        "failed_attempts": failed_attempts,
    }
    journal_only(s, phase, timer, TIMER_EXECUTOR, value)
