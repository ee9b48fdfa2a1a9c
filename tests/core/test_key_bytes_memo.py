"""A key's bytes after its attempt are remembered (``keys._tail``, issue #22: one
idempotency key and call id per effect): the same bytes, and the same errors, as the
key spelled out field by field."""

from __future__ import annotations

import hashlib
import struct

import pytest

from plait.core.keys import JournalKey, call_id, idempotency_key

SEP = b"\x1f"


def _spelled_out(key: JournalKey) -> bytes:
    """The key's bytes as docs/architecture.md §3.4 defines them (no escape needed here)."""
    pack = struct.Struct(">I").pack
    return b"".join((SEP, key.run_id.encode(), SEP, key.task_path.encode(), SEP,
                     key.node.encode(), SEP, pack(key.attempt), SEP, pack(key.effect_seq),
                     SEP, key.kind.encode()))  # fmt: skip


KEYS = [
    JournalKey("r", "", "step", attempt, seq, kind)
    for attempt in (1, 2, 70000)
    for seq in (0, 1, 3)
    for kind in ("tool", "llm", "decide")
] + [JournalKey("run-é", "0/2", "n", 1, 0, "tool")]


def test_remembered_bytes_are_the_spelled_out_bytes() -> None:
    for _ in range(2):  # the second pass reads what the first remembered
        for key in KEYS:
            data = _spelled_out(key)
            assert call_id(key) == hashlib.sha256(b"plait:call:v1" + data).hexdigest()
            assert idempotency_key(key, {"i": 1}) == (
                hashlib.sha256(b"plait:idem:v1" + data + SEP + b'{"i":1}').hexdigest()
            )


def test_errors_are_not_remembered() -> None:
    call_id(JournalKey("r", "", "step", 1, 1, "tool"))
    with pytest.raises(struct.error):  # 1.0 equals the remembered 1, but does not pack
        call_id(JournalKey("r", "", "step", 1, 1.0, "tool"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown effect kind 'tool2'"):
        call_id(JournalKey("r", "", "step", -1, 1, "tool2"))  # the kind, before the attempt
    with pytest.raises(ValueError, match="unknown effect kind 'tool2'"):
        call_id(JournalKey("r", "", "step", 1, 1, "tool2"))
