"""Which loop pass each effect belongs to, so a loop's passes do not read as retries.

A journal key's ``attempt`` counts every try of a node in the run, across loop passes
(so keys never repeat); the scheduler state knows each node's pass (``node_gen``, 0 the
first), the attempts it has made (``attempt``) and where its current pass began
(``attempt_base``). A state says, for each node, which attempts belong to its current
pass: ``attempt_base < a <= attempt``. So an effect's pass is read off a checkpoint
around it: the next one after it (its pass, unless the node was entered again since),
else the one before it (the same pass if the node was still unresolved there, else the
next one, which begins after that checkpoint's last attempt); with no checkpoint before
it, the run's first state is (every node in its first pass, no attempt made).

For the console's timeline (``GET /runs/{id}/journal``, the event stream): only the
checkpoints among the items given and the two just outside them are read, each once. An
effect none of them places (a Send task's, or one of a migrated run whose plan moved its
node) has no pass: the timeline then shows its attempt alone.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from plait.core.node_states import UNRESOLVED
from plait.core.state import SchedulerState
from plait.driver.checkpoints import read_state
from plait.store.base import Store
from plait.store.records import CheckpointMeta, IntentRecord, JournalItem


@dataclass(frozen=True)
class Pass:
    """An effect's loop pass (``generation``, 0 the first) and its try within it (1 the first)."""

    generation: int
    attempt: int


def effect_passes(
    store: Store, run_id: str, node_ids: list[str], items: list[JournalItem]
) -> dict[int, Pass]:
    """The pass of each intent among ``items`` (a contiguous stretch of the journal) that
    a checkpoint places, by its seq. ``node_ids`` are the nodes of the run's plan, in plan
    order (the states' indexes)."""
    intents = [i for i in items if isinstance(i, IntentRecord) and not i.key.task_path]
    if not intents:
        return {}
    seqs = sorted({i.seq for i in items if isinstance(i, CheckpointMeta)})
    first, last = min(i.seq for i in items), max(i.seq for i in items)
    # The checkpoints just outside the stretch: two short reads, whatever its size.
    for beside in (
        store.checkpoint_beside(run_id, first, later=False),
        store.checkpoint_beside(run_id, last, later=True),
    ):
        if beside is not None:
            seqs = sorted({*seqs, beside.seq})
    states: dict[int, SchedulerState] = {}

    def state(seq: int) -> SchedulerState:
        if seq not in states:
            states[seq] = read_state(store, run_id, seq)
        return states[seq]

    index = {node: n for n, node in enumerate(node_ids)}
    found: dict[int, Pass] = {}
    for intent in intents:
        node = index.get(intent.key.node)
        if node is None:
            continue
        at = bisect_left(seqs, intent.seq)
        after = state(seqs[at]) if at < len(seqs) else None
        before = state(seqs[at - 1]) if at > 0 else None
        placed = _placed(intent.key.attempt, node, after, before)
        if placed is not None:
            found[intent.seq] = placed
    return found


def _placed(
    attempt: int, node: int, after: SchedulerState | None, before: SchedulerState | None
) -> Pass | None:
    """``before`` None: no checkpoint before the effect, so the run's first state was
    before it (every node Waiting in its first pass, no attempt made)."""
    for known in (after, before):
        if (
            known is not None
            and node < len(known.attempt)
            and known.attempt_base[node] < attempt <= known.attempt[node]
        ):
            return Pass(known.node_gen[node], attempt - known.attempt_base[node])
    if before is None:
        return Pass(0, attempt)
    if node >= len(before.attempt) or attempt <= before.attempt[node]:
        return None
    if before.node_state[node] in UNRESOLVED:  # still in that pass: a later try of it
        return Pass(before.node_gen[node], attempt - before.attempt_base[node])
    # Settled there: it ran again, so it was entered again, its new pass beginning after
    # the attempts counted there.
    return Pass(before.node_gen[node] + 1, attempt - before.attempt[node])
