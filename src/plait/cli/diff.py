"""``plait diff OLD NEW``: two plans compared by meaning; exit 0 equal, 1 not.

OLD and NEW are workflow files, or run ids for the version a run pinned (``--db``).
``--json`` prints ``plait.workflow.plan_diff.diff_plans``'s object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from plait.cli.common import DbOption, JsonOption, runtime
from plait.cli.output import Output
from plait.core.errors import PlaitError
from plait.workflow import load_workflow
from plait.workflow.plan_diff import described, diff_plans


def diff(
    old: Annotated[str, typer.Argument(metavar="OLD", help="A workflow file or a run id.")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="A workflow file or a run id.")],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Compare two plans by meaning (files, or runs' pinned versions): exit 0 when equal."""
    out = Output(json_output)
    with out.reporting():
        found = diff_plans(_pinned(old, db), _pinned(new, db))
    if json_output:
        out.data(found)
    else:
        lines = described(found) or [f"equal in meaning ({found['old']})"]
        out.text("\n".join(lines))
    raise typer.Exit(0 if found["equal"] else 1)


def _pinned(what: str, db: str | None) -> dict[str, Any]:
    """The pinned definition of a workflow file (a path: one with a folder or a
    ``.yaml``/``.yml``/``.json`` name), else of run ``what`` (PLAIT-E017)."""
    path = Path(what)
    if path.is_file() or path.suffix in (".yaml", ".yml", ".json") or len(path.parts) > 1:
        return load_workflow(what).to_manifest()
    with runtime(db) as rt:
        try:
            return dict(rt.store.manifests(what)[-1]["workflow"])
        except PlaitError as exc:
            if exc.code == "E017":
                raise PlaitError(
                    "E017", f"{what!r} is neither a workflow file nor a run id in the store"
                ) from None
            raise
