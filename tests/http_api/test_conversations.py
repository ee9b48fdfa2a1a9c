"""Conversations over HTTP (issue #18 part 2): ``POST /conversations/{C}/turns`` and
``POST /runs`` with ``conversation`` start the next turn, which goes on from the last
completed turn's transcript; ``GET /conversations`` answers what the CLI prints."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from http_api.support import Api

CHAT = """name: chat
nodes: [{id: chat, instruction: Answer briefly.}]
llm: {model: scripted:chat.json}
"""


def chat(api: Api) -> None:
    (api.folder / "chat.json").write_text('[{"text": "Noted."}]')
    (api.folder / "chat.yaml").write_text(CHAT)


def turn(api: Api, conversation: str, run_id: str, question: str) -> dict[str, Any]:
    body = {"workflow": api.flow("chat"), "run_id": run_id, "input": {"q": question}}
    queued = api.post(f"/conversations/{quote(conversation, safe='')}/turns", body)
    assert queued.status_code == 202, queued.text
    driven = api.post(f"/runs/{run_id}/resume")
    assert driven.status_code == 200, driven.text
    return dict(driven.json())


def first_request(api: Api, run_id: str) -> list[Any]:
    entries = api.get(f"/runs/{run_id}/trace").json()["entries"]
    return list(next(e for e in entries if e["kind"] == "llm")["input"]["messages"])


def test_a_turn_over_http_goes_on_from_the_previous_one(api: Api):
    chat(api)
    turn(api, "support/42", "t1", "first?")
    second = turn(api, "support/42", "t2", "second?")

    messages = first_request(api, "t2")
    assert second["status"] == "completed"
    assert messages == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "first?"},
        {"role": "assistant", "text": "Noted.", "tool_calls": []},
        {"role": "user", "content": "second?"},
    ]


def test_post_runs_with_a_conversation_and_the_listing_matches_the_cli(api: Api):
    chat(api)
    turn(api, "c1", "t1", "first?")
    api.start("chat", "t2", conversation="c1")

    listed = api.get("/conversations")
    one = api.get("/conversations/c1")

    assert listed.status_code == 200
    assert listed.json() == json.loads(api.cli("conversations"))
    assert listed.json()["conversations"][0]["runs"] == ["t1", "t2"]
    assert one.json()["turns"] == 2
    assert api.get("/conversations/nope").json()["error"]["code"] == "PLAIT-E017"


def test_a_turn_while_the_last_one_is_unfinished_is_refused(api: Api):
    chat(api)
    body = {"workflow": api.flow("chat"), "run_id": "t1"}
    assert api.post("/conversations/c1/turns", body).status_code == 202  # queued, not driven
    refused = api.post("/conversations/c1/turns", {**body, "run_id": "t2"})
    mismatch = api.post("/conversations/c1/turns", {**body, "conversation": "c2"})

    assert refused.status_code == 409 and refused.json()["error"]["code"] == "PLAIT-E031"
    assert "'t1' is queued" in refused.json()["error"]["message"]
    assert mismatch.json()["error"]["code"] == "PLAIT-E031"
