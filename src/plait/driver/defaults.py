"""The settings a runtime takes from its environment, each read in one place.

The engine epoch a journal is replayed with, the default store and principal, and the
numeric limits (lease TTL, checkpoint size). A malformed number is refused (PLAIT-E019)
before any store is opened.
"""

from __future__ import annotations

import os
from typing import Any

from plait.core.errors import PlaitError
from plait.driver.env_numbers import whole_number

ENGINE_EPOCH = 4
"""The engine epoch new runs are written by; a run's manifest pins its own (§5.5)."""
SUPPORTED_EPOCHS = frozenset({1, 2, 3, 4})
"""Every epoch this plait replays: each run verifies and resumes under the epoch it was
written by (1: the instruction and input in one JSON user message; 2: the instruction as
a system message, the input as a user message; 3: as 2, and a checkpoint's digest is the
Merkle root of its content-addressed nodes, ``core.merkle``; 4: as 3, and a checkpoint
leaves out every field at a plain default, ``core.state.COMPACT_EPOCH``). A new epoch is
added here and where the core asks ``StepEnv.engine_epoch`` (docs/versions.md)."""
DEFAULT_DB = "sqlite:///.plait/plait.db"
DEFAULT_LEASE_TTL_MS = 30_000
DEFAULT_RETRY_SLEEP_MAX_MS = 5_000
DEFAULT_MAX_CHECKPOINT_BYTES = 256 << 20
"""Canonical bytes one checkpoint may hold (``PLAIT_MAX_CHECKPOINT_BYTES`` overrides it)."""
MAX_CHECKPOINT_ENV = "PLAIT_MAX_CHECKPOINT_BYTES"


def default_db() -> str:
    return os.environ.get("PLAIT_DB") or DEFAULT_DB


def default_principal() -> str:
    import getpass

    return os.environ.get("PLAIT_PRINCIPAL") or getpass.getuser()


def lease_ttl() -> int:
    """How long a lease lasts unless renewed (``PLAIT_LEASE_TTL_MS``)."""
    return whole_number("PLAIT_LEASE_TTL_MS", 1) or DEFAULT_LEASE_TTL_MS


def retry_sleep_limit() -> int:
    """The longest retry wait a drive sleeps through in-process (``PLAIT_RETRY_SLEEP_MAX_MS``,
    0: never); a longer one parks the run for a worker. Kept under a third of the lease
    TTL, so the lease the sleeping drive holds never lapses."""
    limit = whole_number("PLAIT_RETRY_SLEEP_MAX_MS", 0)
    limit = DEFAULT_RETRY_SLEEP_MAX_MS if limit is None else limit
    return min(limit, lease_ttl() // 3)


def max_checkpoint_bytes() -> int:
    """Canonical bytes one checkpoint may hold (``PLAIT_MAX_CHECKPOINT_BYTES``)."""
    return whole_number(MAX_CHECKPOINT_ENV, 1) or DEFAULT_MAX_CHECKPOINT_BYTES


def check_epoch(run_id: str, manifest: dict[str, Any]) -> int:
    """The engine epoch ``run_id`` was written by; PLAIT-E026 unless this plait replays it."""
    epoch = manifest.get("engine_epoch")
    if type(epoch) is not int or epoch not in SUPPORTED_EPOCHS:
        supported = ", ".join(str(e) for e in sorted(SUPPORTED_EPOCHS))
        raise PlaitError(
            "E026",
            f"run '{run_id}' was written by engine epoch {epoch};"
            f" this plait replays epochs {supported}",
        )
    return epoch
