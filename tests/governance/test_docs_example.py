"""docs/governance.md shows the support example as it is: its chart is what ``plait graph``
draws, its YAML is the example's flow file, and its Python builder builds the same flow."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from plait.cli import app
from plait.governance import Flow, flow_from_dict

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "governance.md").read_text()
EXAMPLE = ROOT / "examples" / "support"


def fenced(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", DOC, flags=re.M | re.S)


def test_the_chart_in_the_docs_is_what_plait_graph_draws_for_the_example():
    (chart,) = fenced("mermaid")

    drawn = CliRunner().invoke(app, ["graph", str(EXAMPLE / "workflow.yaml")])

    assert drawn.exit_code == 0, drawn.output
    assert drawn.stdout.split("%% flow of node 'agent'\n", 1)[1] == chart


def test_the_yaml_in_the_docs_is_the_example_flow_file():
    flow_file = yaml.safe_load((EXAMPLE / "flows" / "support.yaml").read_text())
    documented = [yaml.safe_load(block) for block in fenced("yaml")]

    assert flow_file in documented


def test_the_python_builder_in_the_docs_builds_the_example_flow():
    (builder,) = [block for block in fenced("python") if "Flow.new()" in block]
    scope: dict[str, object] = {}

    exec(builder, scope)

    support = scope["support"]
    assert isinstance(support, Flow)
    assert support == flow_from_dict(
        yaml.safe_load((EXAMPLE / "flows" / "support.yaml").read_text())
    )
