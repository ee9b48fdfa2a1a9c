"""``verify --workflow`` onto a plan of another shape: stored checkpoints in the new shape.

A checkpoint's per-node and per-edge lists follow its plan, so a version with a node or
edge added or removed differs from every stored checkpoint in shape alone. ``Reshape``
puts each stored checkpoint of the run's version into the new plan's shape (nodes by id,
edges by their ends: ``core.migrate``) and compares both sides less what the new version
only adds without acting on it, so a run diverges where the new version first does
otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from plait.core.canonical import dumpb, loads
from plait.core.migrate import Matching, reshaped
from plait.core.plan import Plan
from plait.core.state import COMPACT_EPOCH, DecisionRecord
from plait.driver.checkpoints import decode_checkpoint, encode_checkpoint


def reshaper(old: Plan, new: Plan, epoch: int) -> Reshape | None:
    """How checkpoints of ``old`` compare with a replay under ``new`` (a run of engine
    ``epoch``); None for plans of one shape (the same nodes and edges in the same places)."""
    matching = Matching.of(old, new, {})
    if matching.is_identity(new):
        return None
    added_nodes = frozenset(range(len(new.nodes))) - set(matching.nodes)
    added_edges = frozenset(range(len(new.edges))) - set(matching.edges)
    return Reshape(old, new, matching, added_nodes, added_edges, epoch >= COMPACT_EPOCH)


@dataclass(frozen=True)
class Reshape:
    """``verify --workflow`` onto a plan with nodes or edges added or removed: a stored
    checkpoint is put in the new plan's shape (nodes by id, edges by their ends), and
    both sides are compared less what the new version only adds without acting on it —
    an added node still waiting or dead, an added edge that did not fire — so a run
    diverges where the new version first does otherwise, not at its first checkpoint."""

    old: Plan
    new: Plan
    matching: Matching
    added_nodes: frozenset[int]
    added_edges: frozenset[int]
    compact: bool
    """The run's checkpoints leave out fields at their default (epoch 4): so do these."""

    def stored(self, data: bytes) -> bytes:
        """A stored checkpoint of the old plan in the new plan's shape (as it is when work
        pending in it has no place in the new plan: then it differs, as it should)."""
        checkpoint = decode_checkpoint(data)
        record = DecisionRecord.from_json(checkpoint.decisions)
        placed = reshaped(checkpoint.scheduler, record, self.old, self.new, self.matching)
        if placed is None:
            return data
        state, moved_record = placed
        if self.compact:
            return dumpb(
                {"scheduler": state.to_compact_json(), "decisions": moved_record.to_compact_json()}
            )
        return encode_checkpoint(state, moved_record.to_json())

    def masked(self, data: bytes) -> bytes:
        """``data`` less the added nodes and edges the run never acted on."""
        value = loads(data)
        scheduler, decisions = value.get("scheduler", {}), value.get("decisions", {})
        states, res = scheduler.get("node_state") or [], scheduler.get("in_res") or []
        for index in sorted(self.added_nodes):
            if index < len(states) and states[index] in ("Waiting", "Dead"):
                states[index] = "Waiting"
        for resolved in res:
            for edge in sorted(self.added_edges):
                if resolved.get(str(edge)) == "Dead":
                    del resolved[str(edge)]
        edges = [
            entry
            for entry in decisions.get("edges") or []
            if entry[0] not in self.added_edges or entry[2] == "Fired"
        ]
        if edges or not self.compact:
            decisions["edges"] = edges
        else:
            decisions.pop("edges", None)
        return dumpb(value)
