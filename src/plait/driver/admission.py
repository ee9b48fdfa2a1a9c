"""What is refused before a run is written or driven: models, ceilings, inputs.

Each check raises a ``PlaitError`` with its code and leaves the store untouched, so a
refused request loses nothing (PLAIT-E006 a model that cannot run, E019 a malformed
ceiling or input, E025 a model other than the one the run pinned).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plait.core.canonical import CanonicalJSONError, require_json
from plait.core.env import Budgets
from plait.core.errors import PlaitError
from plait.store.records import Journal
from plait.workflow.pinning import pinned_model

if TYPE_CHECKING:
    from plait.models.base import Model
    from plait.workflow.run_definition import RunDefinition


def check_model(
    definition: RunDefinition, model: Model | None = None, *, driven: bool = True
) -> None:
    """Refuse, before a run is written, a model that cannot run (E006) — including an
    unpriced model under a usd ceiling (§7: its cost could not be reserved) and, when this
    process is to drive the run (``driven``), a provider whose API key is not set here (a
    queued run is driven by a worker, whose environment is the one that counts)."""
    if not definition.has_llm:
        return
    from plait.models.prices import price_of
    from plait.models.registry import check_credentials, fallback_specs, run_model

    llm = definition.llm
    spec = definition.model_spec
    decide = llm.get("decide")
    if isinstance(decide, dict):  # its backend must run here (PLAIT-E037), as the model
        from plait.decide import check_backend

        check_backend(str(decide.get("backend", "local")), definition.base_dir)
    if model is None:
        run_model(spec, base_dir=definition.base_dir, settings=dict(llm))
        if driven:
            for each in (spec, *fallback_specs(llm)):  # a fallback must be able to run too
                check_credentials(each)
    if definition.budgets.max_usd_micros is None:
        return
    for each in (spec, *fallback_specs(llm)):
        if price_of(each, llm.get("prices")) is None:
            raise PlaitError(
                "E006",
                f"model '{each}' has no price, so it cannot run under a usd budget:"
                " add it to llm.prices (USD per million tokens)",
            )


CEILINGS = ("max_supersteps", "max_tokens", "max_usd_micros", "max_wall_ms", "max_storage_bytes")
"""Ceilings a run keeps, in its units: counts, micro-dollars, milliseconds, bytes."""


def check_ceilings(raised: Any, what: str) -> None:
    """PLAIT-E019 unless ``raised`` maps known ceilings to whole numbers >= 0: a key the run
    does not know (a workflow file's ``max_usd``, the CLI's ``tokens``) would be journaled
    and change nothing."""
    if not isinstance(raised, dict) or not raised:
        raise PlaitError("E019", f"{what}: expected a non-empty dict of ceilings")
    for key, value in raised.items():
        if key not in CEILINGS:
            raise PlaitError(
                "E019",
                f"{what}: unknown ceiling {key!r}; expected one of {', '.join(CEILINGS)}"
                " (usd in micro-dollars, wall time in ms)",
            )
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise PlaitError("E019", f"{what}: {key} must be a whole number >= 0, got {value!r}")


def check_input(value: Any, what: str = "run input") -> None:
    """What a person hands a run (its input, a steering message) must be JSON plait can
    store; PLAIT-E019 names what is wrong and where."""
    try:
        require_json(value, "input" if what == "run input" else "message")
    except CanonicalJSONError as exc:
        raise PlaitError("E019", f"{what} is not JSON plait can store: {exc}") from None


def check_pinned_model(run_id: str, manifest: dict[str, Any], model: Model | None) -> None:
    """PLAIT-E025 when a run is driven on with a model other than the one it pinned (a
    ``Runtime(model=...)`` resuming it): its turns so far were that model's."""
    pinned = pinned_model(manifest)
    given = getattr(model, "spec", None)
    if pinned is not None and given is not None and given != pinned:
        raise PlaitError(
            "E025",
            f"run '{run_id}' pinned model '{pinned}' at start; this runtime was given"
            f" '{given}' (resume it with the model it started with, or fork it)",
        )


def budgets_of(manifest: dict[str, Any], journal: Journal | None) -> Budgets:
    """A run's ceilings: pinned at start, plus every raise ``journal`` holds (if given)."""
    budgets = dict(manifest["workflow"].get("budgets") or {})
    budgets.update(manifest.get("budgets_override") or {})
    if journal is not None:
        for record in journal.records:
            if record.kind == "budget_raise":
                budgets.update(raised_ceilings(record.body))
    return Budgets.from_json(budgets)


def raised_ceilings(body: dict[str, Any]) -> dict[str, Any]:
    """The ceilings of a ``budget_raise`` record: ``{"budgets", "by"}``, or (journaled
    before raises named who made them) the ceilings themselves; no axis is ``budgets``."""
    inner = body.get("budgets")
    return dict(inner) if isinstance(inner, dict) else dict(body)
