"""What the console reads: ``GET /runs`` paged and filtered, ``GET /runs/ID/journal`` a
page at a time, ``GET /runs/ID/drawing`` (the plan laid out, with live states) and
``GET /workflows/input``; and ``plait runs --limit`` beside them."""

from __future__ import annotations

import json

from http_api.support import Api


def page(api: Api, query: str) -> dict:
    response = api.get("/runs?" + query)
    assert response.status_code == 200, response.text
    return response.json()


def test_runs_page_through_every_run_once_with_next_cursor(api: Api):
    for i in range(5):
        api.start("approval", f"p{i}")
    ids: list[str] = []
    cursor = ""
    while True:
        got = page(api, "limit=2" + (f"&cursor={cursor}" if cursor else ""))
        assert len(got["runs"]) <= 2
        ids += [run["run_id"] for run in got["runs"]]
        if got["next_cursor"] is None:
            break
        cursor = got["next_cursor"]

    assert ids == [run["run_id"] for run in api.get("/runs").json()["runs"]]
    assert sorted(ids) == [f"p{i}" for i in range(5)]
    assert "next_cursor" not in api.get("/runs").json()  # the unpaged answer is as it was


def test_a_paged_run_says_how_it_ended_what_it_spent_and_what_it_waits_for(api: Api):
    api.start("approval", "waits")
    api.start("question", "done")
    api.post(
        f"/runs/done/asks/{api.only_ask('done')['ask_id']}/respond", {"result": 1, "as": "bob"}
    )
    api.post("/runs/done/resume")

    waiting = page(api, "limit=5&status=parked")["runs"]
    finished = page(api, "limit=5&q=don")["runs"]

    assert [r["run_id"] for r in waiting] == ["waits"]
    assert waiting[0]["waiting"][0]["prompt"] == "Ship it?"
    assert waiting[0]["waiting"][0]["approval"] is True
    assert waiting[0]["spent"]["supersteps"] >= 1 and waiting[0]["principal"] == "alice"
    assert [r["run_id"] for r in finished] == ["done"]
    assert finished[0]["outcome"]["kind"] == "completed"
    assert finished[0]["duration_ms"] >= 0 and "waiting" not in finished[0]


def test_runs_filters_by_workflow_and_since(api: Api):
    api.start("approval", "a1")
    api.start("question", "q1")
    created = api.get("/runs/a1/drawing").json()["run"]["created_ms"]

    assert [r["run_id"] for r in page(api, "workflow=question")["runs"]] == ["q1"]
    assert page(api, f"since={created + 10**9}")["runs"] == []


def test_a_bad_limit_or_cursor_is_e019(api: Api):
    for query in ("limit=0", "limit=100000", "cursor=abc", "cursor=1.x"):
        response = api.get("/runs?" + query)
        assert response.status_code == 400, query
        assert response.json()["error"]["code"] == "PLAIT-E019"


def test_the_journal_comes_newest_first_a_page_at_a_time(api: Api):
    api.start("approval", "j1")
    every = [
        json.loads(line[6:]) for line in api.events("j1").splitlines() if line.startswith("data: ")
    ]
    seqs = [e["seq"] for e in every if "seq" in e]

    first = api.get("/runs/j1/journal?limit=3").json()
    rest = api.get(f"/runs/j1/journal?before={first['next_before']}&limit=1000").json()

    assert [i["seq"] for i in first["items"]] == sorted(seqs, reverse=True)[:3]
    assert [i["seq"] for i in first["items"] + rest["items"]] == sorted(seqs, reverse=True)
    assert rest["next_before"] is None
    assert api.get("/runs/nope/journal").status_code == 404
    assert api.get("/runs/j1/journal?limit=0").json()["error"]["code"] == "PLAIT-E019"


def test_the_drawing_places_every_node_and_says_its_state(api: Api):
    api.start("approval", "d1")

    drawn = api.get("/runs/d1/drawing").json()

    states = {n["id"]: n["state"] for n in drawn["nodes"]}
    assert states == {"start": "DoneOk", "approve": "AwaitingClient", "shipped": "Waiting",
                      "held": "Waiting"}  # fmt: skip
    y = {n["id"]: n["y"] for n in drawn["nodes"]}
    assert y["start"] < y["approve"] < y["shipped"] == y["held"]  # layers, top down
    edges = {(e["from"], e["to"]): e["state"] for e in drawn["edges"]}
    assert edges[("start", "approve")] == "fired"
    assert edges[("approve", "shipped")] == "pending"
    assert all(e["d"].startswith("M") for e in drawn["edges"])
    assert drawn["run"]["principal"] == "alice"
    assert drawn["shown"]["status"] == "parked" and drawn["shown"]["asks"][0]["node"] == "approve"


def test_workflow_input_names_the_entry_node(api: Api):
    got = api.get("/workflows/input", params={"path": api.flow("approval")}).json()
    assert got["workflow"] == "approval" and got["entry"] == "start"
    missing = api.get("/workflows/input", params={"path": api.flow("nope")})
    assert missing.json()["error"]["code"].startswith("PLAIT-E")


def test_plait_runs_pages_and_filters_as_the_api_does(api: Api):
    for i in range(3):
        api.start("approval", f"c{i}")
    api.start("question", "other")

    first = json.loads(api.cli("runs", "--limit", "2", "--workflow", "approval"))
    rest = json.loads(api.cli("runs", "--limit", "2", "--workflow", "approval", "--cursor",
                              first["next_cursor"]))  # fmt: skip
    since = json.loads(api.cli("runs", "--since", "2999-01-01"))

    assert [r["run_id"] for r in first["runs"] + rest["runs"]] == ["c2", "c1", "c0"]
    assert rest["next_cursor"] is None
    assert since == {"runs": [], "next_cursor": None}
    for key in ("run_id", "workflow", "status", "principal", "created_ms", "updated_ms"):
        assert key in first["runs"][0]  # CONTRACT.md's fields, still there
    bad = json.loads(api.cli("runs", "--since", "yesterday"))
    assert bad["error"]["code"] == "PLAIT-E019"


def test_runs_sort_by_update_or_creation_either_way_with_cursors_of_their_sort(api: Api):
    for name in ("s0", "s1", "s2"):
        api.start("question", name)
    ask = api.only_ask("s0")["ask_id"]
    api.post(f"/runs/s0/asks/{ask}/respond", {"result": 1, "as": "bob"})
    api.post("/runs/s0/resume")  # s0, the oldest, is now the last one updated
    moved = api.get("/runs/s0/drawing").json()["run"]["updated_ms"]

    def every(query: str) -> list[str]:
        ids: list[str] = []
        cursor = ""
        while True:
            got = page(api, query + (f"&cursor={cursor}" if cursor else ""))
            ids += [run["run_id"] for run in got["runs"]]
            if got["next_cursor"] is None:
                return ids
            cursor = got["next_cursor"]

    assert every("limit=2&sort=updated&order=desc") == ["s0", "s2", "s1"]
    assert every("limit=2&sort=updated&order=asc") == ["s1", "s2", "s0"]
    assert every("limit=1&order=asc") == ["s0", "s1", "s2"]
    assert every("limit=1&sort=created") == ["s2", "s1", "s0"]
    assert [r["run_id"] for r in page(api, f"updated_since={moved}")["runs"]] == ["s0"]
    other = page(api, "limit=1&sort=updated")["next_cursor"]
    for query in (
        "sort=name",
        "order=up",
        f"cursor={other}",
        f"sort=updated&order=asc&cursor={other}",
    ):
        response = api.get("/runs?" + query)
        assert response.status_code == 400, query
        assert response.json()["error"]["code"] == "PLAIT-E019"


def test_plait_runs_sorts_as_the_api_does(api: Api):
    for name in ("t0", "t1"):
        api.start("approval", name)

    oldest = json.loads(api.cli("runs", "--sort", "updated", "--order", "asc", "--limit", "1"))
    later = json.loads(api.cli("runs", "--sort", "updated", "--order", "asc", "--limit", "1",
                               "--cursor", oldest["next_cursor"]))  # fmt: skip
    recent = json.loads(api.cli("runs", "--updated-since", "2999-01-01"))
    bad = json.loads(api.cli("runs", "--sort", "size"))

    assert [r["run_id"] for r in oldest["runs"] + later["runs"]] == ["t0", "t1"]
    assert recent["runs"] == []
    assert bad["error"]["code"] == "PLAIT-E019" and "--sort" in bad["error"]["message"]


def test_each_effect_says_its_loop_pass_and_its_try_within_it(api: Api):
    api.start("loop", "lp")  # `step` loops on itself: one try in each of its 4 passes

    def placed(items: list[dict]) -> list[tuple]:
        return sorted(
            (i["key"]["attempt"], i.get("generation"), i.get("pass_attempt"))
            for i in items
            if i["type"] == "intent" and i["key"]["node"] == "step"
        )

    whole = api.get("/runs/lp/journal?limit=1000").json()["items"]
    paged: list[dict] = []
    before = ""
    while True:  # pages of 2 items: most effects have no checkpoint beside them in their page
        got = api.get(f"/runs/lp/journal?limit=2{before}").json()
        paged += got["items"]
        if got["next_before"] is None:
            break
        before = f"&before={got['next_before']}"
    streamed = [
        json.loads(line[6:]) for line in api.events("lp").splitlines() if line.startswith("data: ")
    ]

    # the journal key's attempt counts on across passes; the pass and its try explain it
    assert placed(whole) == [(1, 0, 1), (2, 1, 1), (3, 2, 1), (4, 3, 1)]
    assert placed(paged) == placed(whole)
    assert placed([e for e in streamed if "type" in e]) == placed(whole)


WOBBLY_TOOLS = '''
from pathlib import Path


def wobbly(i: int = 0) -> dict:
    """Fails every other call: each pass of the loop takes two tries."""
    calls = Path(__file__).with_name("wobbly.calls")
    n = len(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text("x" * n)
    if n % 2:
        raise ConnectionError(f"call {n}: try again")
    return {"i": i + 1}


def done() -> dict:
    return {"done": True}
'''
WOBBLY_FLOW = """
name: wobbly
retry: {max_attempts: 3, initial_s: 0.001, multiplier: 1, jitter: 0}
nodes:
  - id: step
    tool: wobbly
  - id: finish
    tool: done
edges:
  - {from: step, to: step, when: 'i < 2', max_cycles: 5}
  - {from: step, to: finish, when: 'i >= 2'}
tools:
  wobbly: {python: "wobbly_tools:wobbly"}
  done: {python: "wobbly_tools:done"}
"""


def test_a_retry_within_a_pass_is_a_later_attempt_of_the_same_pass(api: Api):
    (api.folder / "wobbly_tools.py").write_text(WOBBLY_TOOLS)
    (api.folder / "wobbly.yaml").write_text(WOBBLY_FLOW)
    assert api.start("wobbly", "wb")["status"] == "completed"

    items = api.get("/runs/wb/journal").json()["items"]
    placed = sorted(
        (i["key"]["attempt"], i["generation"], i["pass_attempt"])
        for i in items
        if i["type"] == "intent" and i["key"]["node"] == "step"
    )

    # each failed try is followed by its backoff wait, an effect of the same attempt
    assert placed == [(1, 0, 1), (1, 0, 1), (2, 0, 2), (3, 1, 1), (3, 1, 1), (4, 1, 2)]
