"""``plait decide calibrate``: fit a decision backend's threshold on labelled examples
(docs/decide.md); the calibration file it writes is what ``llm.decide.calibration`` names."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from plait.cli.common import JsonOption
from plait.cli.output import EXIT_OK, JsonUsageGroup, Output

decide_app = typer.Typer(
    name="decide",
    cls=JsonUsageGroup,
    help="The decision backend (tool offer narrowing, guided folds).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@decide_app.callback()
def _decide() -> None:
    # A callback keeps `decide` a group: typer turns a one-command app into that command.
    pass


@decide_app.command("calibrate")
def calibrate(
    backend: Annotated[
        str, typer.Option("--backend", metavar="SPEC", help="local, scripted:FILE or a model.")
    ],
    examples: Annotated[
        str, typer.Option("--examples", metavar="FILE.jsonl", help="Labelled examples.")
    ],
    out_file: Annotated[
        str, typer.Option("--out", metavar="FILE", help="Where to write the calibration.")
    ] = "calibration.json",
    max_tools: Annotated[
        int, typer.Option("--max-tools", min=1, help="The offer's K (llm.decide.offer).")
    ] = 8,
    json_output: JsonOption = False,
) -> None:
    """Fit the threshold for recall >= 0.95 at K tools; report held-out precision/recall."""
    from plait.decide import backend_from_spec
    from plait.decide.calibration import calibrate as fit_file
    from plait.decide.calibration import load_examples, read_calibration, score_examples

    out = Output(json_output)
    with out.reporting():
        labelled = load_examples(Path(examples))
        chosen = backend_from_spec(backend, Path.cwd(), {})
        scored = asyncio.run(score_examples(chosen, labelled))
        report = fit_file(scored, max_tools, backend, chosen.model)
        target = Path(out_file)
        target.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        report["file"] = str(target)
        report["sha256"] = read_calibration(target)["sha256"]
    if json_output:
        out.data(report)
    else:
        held = report["held_out"]
        out.say(
            f"calibrated {backend} on {report['examples']} examples: threshold"
            f" {report['threshold']}, held-out precision {held['precision']} recall"
            f" {held['recall']} at K={max_tools} -> {target}"
        )
    raise typer.Exit(EXIT_OK)
