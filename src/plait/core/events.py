"""Events into the scheduler and commands out of it (docs/architecture.md §3.3).

Events are the only way nondeterminism enters the core: each one is journaled
by the driver before it is fed, so replay can feed the same sequence.
Commands are what the driver must do, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plait.core.canonical import JSON
from plait.core.canonical import WHOLE_CHECKPOINT_LIMIT as WHOLE_CHECKPOINT_LIMIT
from plait.core.keys import JournalKey
from plait.core.outcomes import EffectOutcome, RunOutcome

if TYPE_CHECKING:
    from plait.core.merkle import CheckpointCut

# A superstep builds a ``ClockReading`` and an ``EffectResolved`` per effect (the driver
# live, verify from the journal) and the step a ``WriteIntent``, a ``Dispatch`` and a
# ``WriteCheckpoint``. The ``__init__`` a dataclass writes for a frozen class sets each
# field through ``object.__setattr__``; the hand-written ones of these classes fill the
# instance's ``__dict__`` in one call instead (as ``store.records`` does for the journal's
# records). They stay frozen (assignment still raises) and take the same arguments;
# ``tests/core/test_one_call_inits.py`` checks each sets exactly its fields.

# --- events -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Start:
    """Begin the run; an absent input is {} and a non-object becomes {"input": value}."""

    input: JSON = None


@dataclass(frozen=True)
class ClockReading:
    """A journaled clock reading in Unix milliseconds; the core keeps the max."""

    unix_ms: int

    def __init__(self, unix_ms: int) -> None:
        self.__dict__["unix_ms"] = unix_ms


@dataclass(frozen=True)
class EffectResolved:
    key: JournalKey
    outcome: EffectOutcome

    def __init__(self, key: JournalKey, outcome: EffectOutcome) -> None:
        self.__dict__.update(key=key, outcome=outcome)


@dataclass(frozen=True, slots=True)
class ResponseSettled:
    """A human answer (or an expiry) for a pending ask, addressed by ask id."""

    ask_id: str
    outcome: EffectOutcome


@dataclass(frozen=True, slots=True)
class CancelSeen:
    by: str
    reason: str


@dataclass(frozen=True, slots=True)
class InputReceived:
    """A steering message (§6.7)."""

    message: JSON


@dataclass(frozen=True, slots=True)
class BudgetRaised:
    """A journaled manifest supersession raised the budgets (§7)."""

    budgets: dict[str, Any]


Event = (
    Start
    | ClockReading
    | EffectResolved
    | ResponseSettled
    | CancelSeen
    | InputReceived
    | BudgetRaised
)

# --- commands ---------------------------------------------------------------


@dataclass(frozen=True)
class WriteIntent:
    """Journal the intent before any dispatch (or adopt the one already journaled)."""

    key: JournalKey
    executor: str
    input: JSON
    superstep: int
    clock_ms: int

    def __init__(
        self, key: JournalKey, executor: str, input: JSON, superstep: int, clock_ms: int
    ) -> None:
        self.__dict__.update(key=key, executor=executor, input=input, superstep=superstep,
                             clock_ms=clock_ms)  # fmt: skip


@dataclass(frozen=True)
class Dispatch:
    """Execute the effect (unless the journal already holds its result)."""

    key: JournalKey
    executor: str
    input: JSON

    def __init__(self, key: JournalKey, executor: str, input: JSON) -> None:
        self.__dict__.update(key=key, executor=executor, input=input)


@dataclass(frozen=True, slots=True)
class EmitEnvelope:
    """The run parked: announce these asks once."""

    asks: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class WriteCheckpoint:
    """Persist the checkpoint: canonical bytes of {"scheduler": state, "decisions": record}.

    Up to engine epoch 2 ``data`` holds those bytes (digest: their SHA-256). From epoch 3
    ``data`` is None and ``cut`` holds the checkpoint cut into nodes, its Merkle digest
    and its size (``core.merkle``): the bytes are built only when asked (``canonical``).

    ``value`` is what ``data`` encodes, copied when the checkpoint was taken (the step
    goes on changing the state's lists): fresh containers around the same strings and
    transcript entries, which never change. A store cuts a large checkpoint from it
    without parsing the bytes again, and finds those strings' hashes already computed.
    A checkpoint of at most WHOLE_CHECKPOINT_LIMIT bytes is stored whole and carries no
    value (copying it would cost more than the rest of a small step's checkpoint).
    """

    superstep: int
    record: dict[str, Any]
    data: bytes | None
    value: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    cut: CheckpointCut | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        superstep: int,
        record: dict[str, Any],
        data: bytes | None,
        value: dict[str, Any] | None = None,
        cut: CheckpointCut | None = None,
    ) -> None:
        self.__dict__.update(superstep=superstep, record=record, data=data, value=value,
                             cut=cut)  # fmt: skip

    @property
    def size(self) -> int:
        """Canonical bytes of the checkpoint (the E015 bound), without building them."""
        return self.cut.size if self.cut is not None else len(self.data or b"")

    def canonical(self) -> bytes:
        """The canonical bytes (built from the cut's nodes: call it only on a cut made
        without a memo, or pass on to ``CheckpointCut.canonical`` the nodes seen before)."""
        if self.data is not None:
            return self.data
        assert self.cut is not None
        return self.cut.canonical()


@dataclass(frozen=True, slots=True)
class Finish:
    outcome: RunOutcome


Command = WriteIntent | Dispatch | EmitEnvelope | WriteCheckpoint | Finish
