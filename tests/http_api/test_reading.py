"""Reading runs over HTTP answers with exactly what `plait VERB --json` prints."""

from __future__ import annotations

import pytest

from http_api.support import Api


def body_text(response) -> str:
    """The body as the CLI would print it (one line of canonical JSON)."""
    assert response.status_code == 200, response.text
    return response.text + "\n"


@pytest.fixture
def two_runs(api: Api) -> Api:
    api.start("approval", "parked-run")  # waits for an approval
    api.start("question", "other-run")
    ask = api.only_ask("other-run")
    api.post(f"/runs/other-run/asks/{ask['ask_id']}/respond", {"result": {"note": "hi"}})
    api.post("/runs/other-run/resume")
    return api


def test_runs_list_equals_plait_runs_json(two_runs: Api):
    assert body_text(two_runs.get("/runs")) == two_runs.cli("runs")
    assert body_text(two_runs.get("/runs?status=parked")) == two_runs.cli(
        "runs", "--status", "parked"
    )
    statuses = {r["run_id"]: r["status"] for r in two_runs.get("/runs").json()["runs"]}
    assert statuses == {"parked-run": "parked", "other-run": "completed"}


@pytest.mark.parametrize("run_id", ["parked-run", "other-run"])
def test_show_and_trace_equal_plait_show_and_trace_json(two_runs: Api, run_id: str):
    assert body_text(two_runs.get(f"/runs/{run_id}")) == two_runs.cli("show", run_id)
    assert body_text(two_runs.get(f"/runs/{run_id}/trace")) == two_runs.cli("trace", run_id)


def test_asks_equal_plait_asks_json(two_runs: Api):
    assert body_text(two_runs.get("/asks")) == two_runs.cli("asks")
    assert body_text(two_runs.get("/runs/parked-run/asks")) == two_runs.cli("asks", "parked-run")
    assert [a["node"] for a in two_runs.get("/asks").json()["asks"]] == ["approve"]


def test_verify_equals_plait_verify_json(two_runs: Api):
    response = two_runs.post("/runs/other-run/verify")

    assert body_text(response) == two_runs.cli("verify", "other-run")
    assert response.json()["verified"] is True


def test_graph_of_a_file_equals_plait_graph_json(api: Api):
    path = api.flow("approval")

    response = api.get("/workflows/graph", params={"path": path})

    assert body_text(response) == api.cli_plain("graph", path, "--json")
    assert response.json()["mermaid"].startswith("flowchart TD\n")


@pytest.mark.parametrize("name", ["approval", "timer", "loop"])
def test_graph_of_a_run_is_the_graph_of_the_definition_it_pinned(api: Api, name: str):
    api.start(name, "r1", detach=True)

    drawn = api.get("/runs/r1/graph")

    assert body_text(drawn) == api.cli_plain("graph", api.flow(name), "--json")


def test_an_unknown_run_is_404_with_the_cli_error_object(api: Api):
    for response in (
        api.get("/runs/nope"),
        api.get("/runs/nope/trace"),
        api.get("/runs/nope/asks"),
        api.get("/runs/nope/events"),
        api.post("/runs/nope/verify"),
        api.post("/runs/nope/resume"),
        api.post("/runs/nope/send", {"message": "hi"}),
    ):
        assert response.status_code == 404, response.request.url
        # The CLI names the store it looked in (issue #18); the server keeps its paths.
        cli = api.cli("show", "nope").replace(f" in store {api.db.removeprefix('sqlite:///')}", "")
        assert body_text_any(response) == cli


def body_text_any(response) -> str:
    return response.text + "\n"


def test_an_unknown_status_is_400_E019(api: Api):
    response = api.get("/runs?status=sleeping")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "PLAIT-E019" and "'sleeping'" in error["message"]


def test_an_invalid_workflow_file_is_400_with_every_problem(api: Api):
    bad = api.folder / "bad.yaml"
    bad.write_text("name: bad\nnodes:\n  - {id: a, tool: t}\n  - {id: a, tool: t}\n")

    response = api.get("/workflows/graph", params={"path": str(bad)})

    assert response.status_code == 400
    assert response.text + "\n" == api.cli_plain("graph", str(bad), "--json")


GOVERNED = """
name: governed
nodes:
  - id: agent
    instruction: Look it up.
    tools: [lookup]
    flow:
      steps:
        - {id: look, allow: [lookup], done: {called_ok: lookup}}
        - {id: finish, after: [look], terminal: true}
tools:
  lookup: {python: "hitl_tools:lookup"}
llm: {model: "scripted:answers.json"}
"""


def test_graph_of_a_run_keeps_its_governance_flows(api: Api):
    (api.folder / "governed.yaml").write_text(GOVERNED)
    (api.folder / "answers.json").write_text("[]")
    api.start("governed", "r1", detach=True)

    drawn = api.get("/runs/r1/graph")

    assert body_text(drawn) == api.cli_plain("graph", api.flow("governed"), "--json")
    assert list(drawn.json()["flows"]) == ["agent"]
