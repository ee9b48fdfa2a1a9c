"""``plait verify``: re-drive a run from its journal alone and compare every checkpoint.

The replay itself is ``replay.py``; here is which environment a run is replayed in (the
one it pinned, a migration's, ``verify --workflow``'s) and whether one long run is
replayed in segments on every core (``verify_cores.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plait.core.env import Budgets, StepEnv
from plait.core.errors import PlaitError
from plait.driver.admission import budgets_of
from plait.driver.defaults import check_epoch
from plait.driver.environment import env_from_manifest, make_env
from plait.driver.host import Host
from plait.driver.replay import EnvAt, VerifyReport, replay
from plait.driver.reshape import Reshape, reshaper
from plait.driver.verify_cores import reads_apart, verify_apart, verify_on_cores
from plait.store.base import Store
from plait.workflow import manifest_plan

__all__ = ["VerifyReport", "verify_pinned", "verify_run", "verify_with"]

if TYPE_CHECKING:
    from plait.workflow import Workflow
    from plait.workflow.run_definition import RunDefinition


def verify_run(
    store: Store,
    run_id: str,
    env: StepEnv,
    env_at: EnvAt | None = None,
    reshape: Reshape | None = None,
    workers: int = 1,
) -> VerifyReport:
    """Replay ``run_id``'s journal through the core; never dispatches anything. A
    journaled migration is re-derived (``core.migrate``) and compared like any checkpoint;
    the replay goes on in the environment ``env_at`` gives for its manifest. ``reshape``:
    how a stored checkpoint of the run's first version is put in the shape of ``env``'s
    plan (``verify --workflow`` onto a plan with other nodes or edges). ``workers``: how
    many processes may replay a long plain run in segments at once (``verify_cores``:
    when they all pass, the report is the whole replay's; otherwise it is replayed whole;
    on a store with ``RangeReads`` each process reads only its own rows, and the journal
    is read whole here only when a segment did not pass).

    The journal is read lazily (``JournalRows``): before any report, and when anything
    raises, every row the replay did not read is decoded, so a corrupt row ends a verify
    with PLAIT-E010 as it would had the whole journal been read first."""
    split = workers > 1 and reshape is None
    if split and reads_apart(store):
        report = verify_apart(store, run_id, env, workers)  # each process reads its rows
        if report is not None:
            return report
        split = False  # a segment did not pass: the whole replay, in one process
    journal = store.journal_rows(run_id)
    try:
        report = None
        if split:
            report = verify_on_cores(store, journal, env, workers)
        if report is None:
            report = replay(store, journal, env, env_at, reshape)[0]
    except Exception:
        journal.check()
        raise
    journal.check()
    return report


def verify_pinned(
    host: Host, run_id: str, workflow: Workflow | None = None, workers: int = 1
) -> VerifyReport:
    """Verify ``run_id`` against what it pinned: its manifest alone when it pinned its tool
    schemas (no workflow file, tool module or model), else its pinned definition; from a
    migration on, the version the migration pinned. ``workers``: as ``verify_run``."""
    manifests = [dict(m) for m in host.store.manifests(run_id)]
    manifest = manifests[0]
    check_epoch(run_id, manifest)  # another engine generation's journal replays differently
    # Verify starts from the ceilings pinned at start; raises apply where they were fed.
    env = _pinned_env(host, run_id, manifest, workflow, {})
    return verify_run(
        host.store,
        run_id,
        env,
        lambda index, raised: _pinned_env(host, run_id, manifests[index], None, raised),
        workers=workers,
    )


def _pinned_env(
    host: Host,
    run_id: str,
    manifest: dict[str, Any],
    workflow: Workflow | None,
    raised: dict[str, Any],
) -> StepEnv:
    """The environment ``manifest`` pins, with the ceilings ``raised`` so far."""
    budgets = Budgets.from_json({**budgets_of(manifest, None).to_json(), **raised})
    epoch = check_epoch(run_id, manifest)  # each run replays with the epoch it pinned
    if workflow is None and "tool_schemas" in manifest:
        schemas = manifest["tool_schemas"]
        return env_from_manifest(manifest["workflow"], schemas, budgets, epoch=epoch)
    if workflow is None and manifest.get("source") is None:
        raise PlaitError("E010", f"run '{run_id}' was started from Python; pass its workflow")
    return make_env(host.definitions.pinned(manifest, workflow), budgets, epoch=epoch)


def verify_with(host: Host, run_id: str, definition: RunDefinition) -> VerifyReport:
    """Replay ``run_id``'s journal against another version of its plan (``definition``,
    ``plait verify --workflow``): offline, as ``verify`` is; the report says where the
    new version first decides otherwise, or that it replays the run identically."""
    manifests = [dict(m) for m in host.store.manifests(run_id)]
    manifest = manifests[0]
    epoch = check_epoch(run_id, manifest)
    budgets = Budgets.from_json(
        {**definition.pinned.get("budgets", {}), **(manifest.get("budgets_override") or {})}
    )
    env = env_from_manifest(definition.pinned, definition.tool_schemas, budgets, epoch=epoch)
    # The new version stands for the one the run started on; a migration's own stays.
    return verify_run(
        host.store,
        run_id,
        env,
        lambda index, raised: _pinned_env(host, run_id, manifests[index], None, raised),
        reshaper(manifest_plan(manifest["workflow"]), env.plan, epoch),
    )
