"""Journal keys and the identities derived from them (docs/architecture.md §3.4).

A ``JournalKey`` names one effect of one run for ever: replay looks results up
by key, never by position. ``call_id`` and ``idempotency_key`` are SHA-256
digests built with unambiguous separators and fixed-width integers, so
``("a", "b/c")`` and ``("a/b", "c")`` can never collide.
"""

from __future__ import annotations

import hashlib
import struct
from functools import lru_cache
from typing import Any, NamedTuple

from plait.core.canonical import JSON, dumpb

KINDS: tuple[str, ...] = ("tool", "llm", "decide")
"""Effect kinds in their declared order (which is also their sort order)."""

_KIND_RANK = {kind: rank for rank, kind in enumerate(KINDS)}
_PREFIX = b"plait:call:v1"
_IDEM_PREFIX = b"plait:idem:v1"
_SEP = b"\x1f"
_ESC = b"\x1e"


def _field(text: str) -> bytes:
    """A string field of a key, escaped so a separator inside it cannot end it early.

    Text without the two control characters (every real id) encodes as plain UTF-8, so
    no call id changed when escaping was introduced.
    """
    data = text.encode("utf-8")
    if _ESC in data or _SEP in data:
        data = data.replace(_ESC, _ESC + _ESC).replace(_SEP, _ESC + _SEP)
    return data


class JournalKey(NamedTuple):
    """``(run_id, task_path, node, attempt, effect_seq, kind)``; ``node`` is the node id."""

    run_id: str
    task_path: str
    node: str
    attempt: int
    effect_seq: int
    kind: str

    def sort_key(self) -> tuple[str, str, str, int, int, int]:
        """Field-by-field order with kinds in declared order (tool < llm < decide)."""
        return (
            self.run_id,
            self.task_path,
            self.node,
            self.attempt,
            self.effect_seq,
            _KIND_RANK[self.kind],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "task_path": self.task_path,
            "node": self.node,
            "attempt": self.attempt,
            "effect_seq": self.effect_seq,
            "kind": self.kind,
        }

    @staticmethod
    def from_json(value: dict[str, Any]) -> JournalKey:
        return JournalKey(
            str(value["run_id"]),
            str(value["task_path"]),
            str(value["node"]),
            int(value["attempt"]),
            int(value["effect_seq"]),
            str(value["kind"]),
        )


def _key_bytes(key: JournalKey) -> bytes:
    run_id, task_path, node, attempt, effect_seq, kind = key
    tail = _tail(effect_seq, kind)  # first: an unknown kind is the error reported
    return _head(run_id, task_path, node) + _pack(attempt) + tail


@lru_cache(maxsize=1024)
def _head(run_id: str, task_path: str, node: str) -> bytes:
    """The key's bytes up to its attempt: the same for every effect of a node, remembered."""
    return b"".join((_SEP, _field(run_id), _SEP, _field(task_path), _SEP, _field(node), _SEP))


@lru_cache(maxsize=1024, typed=True)
def _tail(effect_seq: int, kind: str) -> bytes:
    """The key's bytes after its attempt: a few values of ``effect_seq`` and ``kind`` make
    most keys, remembered as ``_head`` is. Typed, so ``1.0`` still fails to pack where
    ``1`` was remembered; what raises (an unknown kind, a bad number) is not remembered."""
    kind_bytes = _KIND_BYTES.get(kind)
    if kind_bytes is None:
        raise ValueError(f"unknown effect kind {kind!r}")
    return _SEP + _pack(effect_seq) + kind_bytes


_pack = struct.Struct(">I").pack
_KIND_BYTES = {kind: _SEP + _field(kind) for kind in KINDS}


def call_id(key: JournalKey) -> str:
    """Stable identity of one effect: ask ids, tool-call ids and child run ids derive from it."""
    return hashlib.sha256(_PREFIX + _key_bytes(key)).hexdigest()


def idempotency_key(key: JournalKey, input_value: JSON, *, identity: str | None = None) -> str:
    """Handed to executors; identical on redelivery of the same effect with the same input.

    ``identity``, when the caller has one, stands for the input one-to-one instead of its
    canonical text: a durable driver passes a long transcript's content address, which it
    has without serializing the whole transcript again at every turn.
    """
    data = dumpb(input_value) if identity is None else identity.encode("utf-8")
    return hashlib.sha256(_IDEM_PREFIX + _key_bytes(key) + _SEP + data).hexdigest()


def child_run_id(parent_run_id: str, key: JournalKey) -> str:
    """Run id of a subgraph child: ``parent~<16 hex of the call id>``."""
    return f"{parent_run_id}~{call_id(key)[:16]}"
