"""Where pending asks are listed: `asks`, `show`, `run`/`resume`, the HTTP API (§8, §3.9).

An ask is pending from the park that announces it until its answer is journaled: an
answered ask is listed nowhere, whether or not the run was driven since (a run parked on
its other asks writes no new checkpoint). A parent parked on a child run lists the
child's asks wherever it lists its own. Fields that do not apply are omitted
(CONTRACT.md): ``tool_name`` for an ask node's ask, ``expires_at`` without
``asks.ttl_s``.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hitl.support import T0, Plait
from plait.server import create_app

TOKEN = "listing-token"

FANOUT = """\
# start fans out to two asks; finish joins them.
name: fanout
nodes:
  - {id: start, tool: start}
  - {id: q1, ask: {prompt: First?}}
  - {id: q2, ask: {prompt: Second?}}
  - {id: finish, tool: finish}
edges:
  - {from: start, to: q1}
  - {from: start, to: q2}
  - {from: q1, to: finish}
  - {from: q2, to: finish}
tools:
  start: {python: "hitl_tools:start"}
  finish: {python: "hitl_tools:finish"}
"""

PARENT = """\
# start -> archive (a child run that parks on an ask) -> finish.
name: parent
nodes:
  - {id: start, tool: start}
  - {id: archive, workflow: child.yaml}
  - {id: finish, tool: finish}
edges:
  - {from: start, to: archive}
  - {from: archive, to: finish}
tools:
  start: {python: "hitl_tools:start"}
  finish: {python: "hitl_tools:finish"}
"""

CHILD = """\
name: child
nodes:
  - {id: question, ask: {prompt: Archive where?}}
"""


@pytest.fixture
def flows(plait: Plait) -> Plait:
    for name, text in (("fanout", FANOUT), ("parent", PARENT), ("child", CHILD)):
        (plait.folder / f"{name}.yaml").write_text(text)
    return plait


@pytest.fixture
def http(plait: Plait, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The HTTP API on the same SQLite file (it only reads here)."""
    for name in ("PLAIT_DB", "PLAIT_NOW_MS", "PLAIT_SERVE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    app = create_app(TOKEN, db=plait.db, poll_s=0.0)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


def listed(plait: Plait, run_id: str) -> dict[str, list[str]]:
    """The nodes of the asks each listing shows for ``run_id``."""
    return {
        "asks": [a["node"] for a in plait("asks", run_id).data["asks"]],
        "show": [a["node"] for a in plait("show", run_id).data["asks"]],
        "asks (every run)": [a["node"] for a in plait("asks").data["asks"]],
    }


def by_node(asks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {a["node"]: a for a in asks}


def test_an_answered_ask_is_no_longer_listed_before_or_after_a_resume(flows: Plait):
    parked = flows.run("fanout", "f")
    assert parked.returncode == 3, parked
    asks = by_node(parked.data["asks"])
    assert sorted(asks) == ["q1", "q2"]

    assert flows("respond", "f", asks["q1"]["ask_id"], "--result", '{"x": 1}').returncode == 0

    assert listed(flows, "f") == {"asks": ["q2"], "show": ["q2"], "asks (every run)": ["q2"]}
    still = flows("resume", "f")  # q1 settles; the join still waits for q2
    assert still.returncode == 3, still
    assert [a["node"] for a in still.data["asks"]] == ["q2"]
    assert listed(flows, "f") == {"asks": ["q2"], "show": ["q2"], "asks (every run)": ["q2"]}
    again = flows("respond", "f", asks["q1"]["ask_id"], "--result", '{"x": 2}')
    assert (again.returncode, again.code) == (2, "PLAIT-E011")
    assert "already answered" in again.data["error"]["message"]

    assert flows("respond", "f", asks["q2"]["ask_id"], "--result", '{"y": 2}').returncode == 0
    done = flows("resume", "f")
    assert done.returncode == 0, done
    assert done.data["asks"] == [] and done.data["context"]["x"] == 1
    assert listed(flows, "f") == {"asks": [], "show": [], "asks (every run)": []}
    assert flows.verify("f")["up_to"] == "terminal"


def test_an_answered_tool_call_ask_of_one_turn_is_no_longer_listed(plait: Plait):
    calls = [
        {"name": "pay", "arguments": {"amount": 1}},
        {"name": "pay", "arguments": {"amount": 2}},
    ]
    plait.scripted([{"text": "", "tool_calls": calls}, {"text": '{"done": true}'}])
    parked = plait.run("payments", "pay")
    assert parked.returncode == 3, parked
    first, second = sorted(parked.data["asks"], key=lambda a: a["input"]["amount"])

    assert plait("approve", "pay", first["ask_id"], principal="bob").returncode == 0

    for resumed in (False, True):
        if resumed:
            run = plait("resume", "pay")
            assert run.returncode == 3, run
            assert [a["ask_id"] for a in run.data["asks"]] == [second["ask_id"]]
        for verb in ("asks", "show"):
            found = plait(verb, "pay").data["asks"]
            assert [a["ask_id"] for a in found] == [second["ask_id"]], (verb, resumed)


def test_show_of_a_parent_parked_on_a_child_lists_the_childs_ask(flows: Plait):
    parked = flows.run("parent", "p")
    assert parked.returncode == 3, parked
    (ask,) = parked.data["asks"]
    assert ask["node"] == "question" and ask["run_id"].startswith("p~")

    shown = flows("show", "p")
    assert shown.returncode == 3
    assert shown.data["asks"] == parked.data["asks"] == flows("asks", "p").data["asks"]
    # Every parked run's asks: the child's ask once, under the child's run id.
    assert flows("asks").data["asks"] == [ask]

    answered = flows("respond", "p", ask["ask_id"], "--result", '{"where": "shelf"}')
    assert answered.returncode == 0 and answered.data["run_id"] == ask["run_id"]
    assert listed(flows, "p") == {"asks": [], "show": [], "asks (every run)": []}
    again = flows("respond", "p", ask["ask_id"], "--result", '{"where": "bin"}')
    assert (again.returncode, again.code) == (2, "PLAIT-E011")
    assert "already answered" in again.data["error"]["message"]

    done = flows("resume", "p")
    assert done.returncode == 0, done
    assert done.data["asks"] == [] and done.data["context"]["where"] == "shelf"


def test_a_fork_of_a_parent_parked_on_a_child_gets_a_child_of_its_own(flows: Plait):
    """§5.6: the base run is never touched, also not through the child it waits on."""
    base = flows.run("parent", "p")
    (base_ask,) = base.data["asks"]

    fork = flows("fork", "p")

    assert fork.returncode == 3, fork
    fork_id = fork.data["run_id"]
    (fork_ask,) = fork.data["asks"]
    assert fork_ask["run_id"].startswith(fork_id + "~")  # not the base's child
    assert flows("asks", "p").data["asks"] == [base_ask]
    answered = flows("respond", fork_id, fork_ask["ask_id"], "--result", '{"where": "bin"}')
    assert answered.returncode == 0 and answered.data["run_id"] == fork_ask["run_id"]
    done = flows("resume", fork_id)
    assert done.returncode == 0, done
    assert done.data["context"]["where"] == "bin"
    assert flows("asks", "p").data["asks"] == [base_ask]  # still waiting, unanswered
    assert flows("show", base_ask["run_id"]).data["status"] == "parked"
    assert flows.verify(fork_id)["up_to"] == "terminal"


def test_fields_that_do_not_apply_are_omitted_and_expires_at_is_unix_seconds(plait: Plait):
    plait.scripted([{"text": "", "tool_calls": [{"name": "pay", "arguments": {"amount": 3}}]}])
    runs = {"approval": "a", "account": "t", "payments": "p"}
    started = {name: plait.run(name, run_id) for name, run_id in runs.items()}

    for name, run_id in runs.items():
        assert started[name].returncode == 3, started[name]
        listings = [
            started[name].data["asks"],
            plait("show", run_id).data["asks"],
            plait("asks", run_id).data["asks"],
            [a for a in plait("asks").data["asks"] if a["run_id"] == run_id],
        ]
        envelopes = [r.body["asks"] for r in plait.records(run_id, "envelope")]
        for asks in [*listings, *envelopes]:
            (ask,) = asks
            assert None not in ask.values(), (name, ask)
            if name == "payments":
                assert ask["tool_name"] == "pay"
            else:
                assert "tool_name" not in ask
            if name == "account":  # asks: {ttl_s: 60}
                assert ask["expires_at"] == T0 // 1000 + 60
                assert isinstance(ask["expires_at"], int)
            else:
                assert "expires_at" not in ask


def test_an_expired_ask_is_no_longer_listed(plait: Plait):
    plait.run("account", "t")  # asks: {ttl_s: 60}
    before, after = T0 + 60_000, T0 + 61_000  # expires_at is a second: it passes after it

    for verb in ("asks", "show"):
        assert [a["node"] for a in plait(verb, "t", now=before).data["asks"]] == ["account"]
        assert plait(verb, "t", now=after).data["asks"] == []
    assert plait("asks", now=after).data["asks"] == []
    (ask,) = plait("asks", "t", now=before).data["asks"]
    late = plait("respond", "t", ask["ask_id"], "--result", "{}", now=after)
    assert (late.returncode, late.code) == (2, "PLAIT-E011")
    assert "expired" in late.data["error"]["message"]


def test_a_run_driven_on_after_its_park_shows_running_not_parked(plait: Plait):
    """Approved, then resumed: the approved call runs and the driver dies before its
    result is journaled. The last checkpoint is still the park; the run is not parked."""
    plait.scripted([{"text": "", "tool_calls": [{"name": "pay", "arguments": {"amount": 1}}]}])
    (ask,) = plait.run("payments", "pay").data["asks"]
    assert plait("approve", "pay", ask["ask_id"], principal="bob").returncode == 0

    crashed = plait("resume", "pay", env={"PLAIT_CRASH_AT": "result:1"})

    assert crashed.returncode == -signal.SIGKILL, crashed
    shown = plait("show", "pay")
    assert (shown.returncode, shown.data["status"], shown.data["asks"]) == (3, "running", [])
    assert [r["status"] for r in plait("runs").data["runs"]] == ["running"]


def test_the_http_api_lists_asks_as_the_cli_does(flows: Plait, http: TestClient):
    asks = by_node(flows.run("fanout", "f").data["asks"])
    flows.run("parent", "p")
    flows("respond", "f", asks["q1"]["ask_id"], "--result", "{}")

    assert http.get("/runs/f/asks").json() == flows("asks", "f").data
    assert http.get("/runs/p/asks").json() == flows("asks", "p").data
    assert http.get("/asks").json() == flows("asks").data
    for run_id in ("f", "p"):
        assert http.get(f"/runs/{run_id}").json() == flows("show", run_id).data
    shown = http.get("/runs/f").json()["asks"]
    assert [a["node"] for a in shown] == ["q2"]
    assert set(shown[0]) == {"ask_id", "node", "prompt", "input", "approval", "run_id"}
    assert [a["node"] for a in http.get("/runs/p").json()["asks"]] == ["question"]


def test_asks_page_through_parked_runs_longest_waiting_first(flows: Plait, http: TestClient):
    """``--limit``/``--cursor`` (and ``GET /asks?limit``): the asks of a page of parked
    runs, those parked earliest first; a page counts runs, so a parent parked on its child
    fills a place with no ask of its own, and a run's asks are never split."""
    flows.run("fanout", "late", now=T0 + 3_000)
    flows.run("fanout", "early", now=T0 + 1_000)
    flows.run("parent", "middle", now=T0 + 2_000)  # parks "middle" and its child
    every = flows("asks").data["asks"]

    pages = [flows("asks", "--limit", "2").data]
    while pages[-1]["next_cursor"] is not None:
        page = flows("asks", "--limit", "2", "--cursor", pages[-1]["next_cursor"])
        assert page.returncode == 0, page
        pages.append(page.data)

    (child,) = [a["run_id"] for a in every if a["run_id"].startswith("middle~")]
    assert [[(a["run_id"], a["node"]) for a in page["asks"]] for page in pages] == [
        [("early", "q2"), ("early", "q1")],  # early, then middle (parked on its child)
        [(child, "question"), ("late", "q2"), ("late", "q1")],
    ]
    assert sorted(map(str, every)) == sorted(str(a) for page in pages for a in page["asks"])
    assert http.get("/asks", params={"limit": 2}).json() == pages[0]
    cursor = pages[0]["next_cursor"]
    assert http.get("/asks", params={"limit": 2, "cursor": cursor}).json() == pages[1]
    assert http.get("/asks", params={"cursor": cursor}).json() == pages[1]  # the default limit
    assert http.get("/asks").json() == {"asks": every}  # unpaged: as before, no cursor

    (ask,) = [a for a in pages[1]["asks"] if a["run_id"] == child]
    assert flows("respond", "middle", ask["ask_id"], "--result", '{"where": "bin"}').returncode == 0
    assert [a["run_id"] for a in flows("asks", "--cursor", cursor).data["asks"]] == [
        "late",
        "late",
    ]


def test_a_page_of_asks_refuses_one_run_a_bad_limit_and_a_cursor_it_did_not_give(
    flows: Plait, http: TestClient
):
    flows.run("fanout", "f")
    runs_cursor = flows("runs", "--limit", "1").data["next_cursor"] or "1.1"
    for argv, words in (
        (("asks", "f", "--limit", "2"), "not of one run"),
        (("asks", "--limit", "0"), "--limit 0"),
        (("asks", "--cursor", "bogus"), "--cursor 'bogus'"),
        (("asks", "--cursor", runs_cursor), "sorted by"),
    ):
        refused = flows(*argv)
        assert (refused.returncode, refused.code) == (2, "PLAIT-E019"), argv
        assert words in refused.data["error"]["message"], (argv, refused.data)
    bad = http.get("/asks", params={"limit": 0})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "PLAIT-E019"
