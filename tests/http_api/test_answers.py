"""Answering, steering and driving runs over HTTP: the CLI's verbs, bodies and refusals."""

from __future__ import annotations

from http_api.support import OWNER, Api


def error_of(response) -> dict:
    return response.json()["error"]


def test_an_approval_answered_over_http_then_resumed_completes(api: Api):
    parked = api.start("approval", "r1")
    assert parked["status"] == "parked" and parked["outcome"] is None
    ask = api.only_ask("r1")
    assert ask["approval"] is True and ask["prompt"] == "Ship it?"

    answered = api.post(f"/runs/r1/asks/{ask['ask_id']}/approve", {"as": "bob", "reason": "ok"})

    assert answered.status_code == 200
    assert answered.json() == {
        "run_id": "r1",
        "ask_id": ask["ask_id"],
        "accepted": True,
        "by": "bob",
    }
    resumed = api.post("/runs/r1/resume")
    assert resumed.status_code == 200
    done = resumed.json()
    assert done["status"] == "completed" and done["outcome"] == {"kind": "completed"}
    assert done["context"]["branch"] == "approved"
    assert done["context"]["by"] == "bob" and done["context"]["reason"] == "ok"
    assert api.get("/runs/r1").text + "\n" == api.cli("show", "r1")
    assert api.post("/runs/r1/verify").json()["verified"] is True


def test_a_denial_over_http_takes_the_denied_branch(api: Api):
    api.start("approval", "r1")
    ask = api.only_ask("r1")

    denied = api.post(f"/runs/r1/asks/{ask['ask_id']}/deny", {"as": "bob", "reason": "not now"})

    assert denied.status_code == 200 and denied.json()["by"] == "bob"
    done = api.post("/runs/r1/resume").json()
    assert done["context"]["branch"] == "denied" and done["context"]["approved"] is False


def test_an_approval_by_the_runs_own_principal_is_403_E012(api: Api):
    api.start("approval", "r1")
    ask = api.only_ask("r1")

    for body in (None, {}, {"as": OWNER}):  # naming nobody acts as the server's principal
        refused = api.post(f"/runs/r1/asks/{ask['ask_id']}/approve", body)
        assert refused.status_code == 403
        assert error_of(refused)["code"] == "PLAIT-E012"
    assert api.get("/runs/r1").json()["status"] == "parked"


def test_a_second_answer_is_409_E011(api: Api):
    api.start("approval", "r1")
    ask = api.only_ask("r1")
    api.post(f"/runs/r1/asks/{ask['ask_id']}/approve", {"as": "bob"})

    again = api.post(f"/runs/r1/asks/{ask['ask_id']}/deny", {"as": "carol", "reason": "late"})

    assert again.status_code == 409
    assert error_of(again) == {
        "code": "PLAIT-E011",
        "message": f"ask '{ask['ask_id']}' was already answered",
    }


def test_an_unknown_ask_is_409_E011_and_an_unknown_run_404_E017(api: Api):
    api.start("approval", "r1")

    unknown_ask = api.post("/runs/r1/asks/nope/approve", {"as": "bob"})
    unknown_run = api.post("/runs/nope/asks/nope/approve", {"as": "bob"})

    assert unknown_ask.status_code == 409 and error_of(unknown_ask)["code"] == "PLAIT-E011"
    assert unknown_run.status_code == 404
    assert error_of(unknown_run) == {"code": "PLAIT-E017", "message": "unknown run id 'nope'"}


def test_an_answer_that_does_not_match_the_asks_schema_is_422_E028(api: Api):
    api.start("account", "r1")
    ask = api.only_ask("r1")

    wrong = api.post(f"/runs/r1/asks/{ask['ask_id']}/respond", {"result": {"acct": 1}})
    right = api.post(f"/runs/r1/asks/{ask['ask_id']}/respond", {"result": {"account": "A-1"}})

    assert wrong.status_code == 422 and error_of(wrong)["code"] == "PLAIT-E028"
    assert right.status_code == 200 and right.json()["accepted"] is True
    assert api.post("/runs/r1/resume").json()["context"]["account"] == "A-1"


def test_respond_needs_exactly_one_of_result_and_deny(api: Api):
    api.start("question", "r1")
    ask_id = api.only_ask("r1")["ask_id"]
    path = f"/runs/r1/asks/{ask_id}/respond"

    for body in ({}, {"result": 1, "deny": "no"}, {"deny": None}):
        refused = api.post(path, body)
        assert refused.status_code == 422, body
        assert error_of(refused)["code"] == "PLAIT-E028"
    assert api.post(path, {"deny": "nothing to add"}).status_code == 200


def test_a_malformed_body_is_400_E019_naming_the_field(api: Api):
    api.start("question", "r1")

    typo = api.post("/runs/r1/send", {"mesage": "hi"})
    wrong_type = api.post("/runs", {"workflow": 7})

    assert typo.status_code == 400 and error_of(typo)["code"] == "PLAIT-E019"
    assert "message" in error_of(typo)["message"] and "mesage" in error_of(typo)["message"]
    assert wrong_type.status_code == 400 and "workflow" in error_of(wrong_type)["message"]


def test_cancel_answers_as_the_cli_and_the_next_resume_finishes_canceled(api: Api):
    api.start("approval", "r1")

    accepted = api.post("/runs/r1/cancel", {"reason": "changed my mind", "as": "carol"})

    assert accepted.status_code == 200 and accepted.json() == {"run_id": "r1", "accepted": True}
    done = api.post("/runs/r1/resume").json()
    assert done["status"] == "canceled"
    assert done["outcome"] == {
        "kind": "canceled",
        "detail": "canceled by carol: changed my mind",
        "by": "carol",
        "reason": "changed my mind",
    }


def test_send_journals_a_steering_message(api: Api):
    api.start("question", "r1")

    accepted = api.post("/runs/r1/send", {"message": "hurry"})

    assert accepted.json() == {"run_id": "r1", "accepted": True}
    assert api.cli("trace", "r1")  # the run is still readable
    assert any('"inbox"' in line for line in api.events("r1").splitlines())


def test_raise_budget_then_resume_goes_on_after_the_budget_ran_out(api: Api):
    exhausted = api.start("storage", "r1")
    assert exhausted["status"] == "budget_exhausted"

    raised = api.post("/runs/r1/raise-budget", {"storage_bytes": 100000, "usd": "2.5"})

    assert raised.status_code == 200
    assert raised.json() == {
        "run_id": "r1",
        "accepted": True,
        "budgets": {"max_storage_bytes": 100000, "max_usd_micros": 2500000},
    }
    assert api.post("/runs/r1/resume").json()["status"] == "completed"


def test_raise_budget_refuses_an_unknown_axis_or_a_value_that_is_not_a_number(api: Api):
    api.start("storage", "r1")

    for body in ({"coins": 3}, {"tokens": "lots"}, {"tokens": True}, {"tokens": -1}, {}):
        refused = api.post("/runs/r1/raise-budget", body)
        assert refused.status_code == 400, body
        assert error_of(refused)["code"] == "PLAIT-E019"


def test_a_detached_run_is_queued_and_a_duplicate_run_id_is_409_E016(api: Api):
    queued = api.start("question", "r1", detach=True, input={"topic": "x"})

    duplicate = api.post("/runs", {"workflow": api.flow("question"), "run_id": "r1"})

    assert queued["status"] == "queued" and queued["context"] == {"topic": "x"}
    assert duplicate.status_code == 409 and error_of(duplicate)["code"] == "PLAIT-E016"


def test_a_run_started_over_http_belongs_to_the_principal_it_names(api: Api):
    api.start("approval", "r1", **{"as": "dora"})
    ask = api.only_ask("r1")

    assert api.get("/runs").json()["runs"][0]["principal"] == "dora"
    assert api.post(f"/runs/r1/asks/{ask['ask_id']}/approve", {"as": "dora"}).status_code == 403
    assert api.post(f"/runs/r1/asks/{ask['ask_id']}/approve").status_code == 200  # as alice


def test_a_fork_over_http_starts_a_new_run(api: Api):
    api.start("approval", "r1")

    forked = api.post("/runs/r1/fork", {"at": 1})

    assert forked.status_code == 200
    assert forked.json()["run_id"].startswith("r1-fork-")
    assert forked.json()["status"] == "parked"


def test_a_fork_over_http_with_set_edits_its_context_as_the_principal_it_names(api: Api):
    api.start("approval", "r1")

    forked = api.post("/runs/r1/fork", {"at": 1, "set": {"note": "x"}, "as": "dora"})
    refused = api.post("/runs/r1/fork", {"at": 1, "set": {"$inbox": []}})

    assert forked.status_code == 200 and forked.json()["context"]["note"] == "x"
    principals = {r["run_id"]: r["principal"] for r in api.get("/runs").json()["runs"]}
    assert principals == {"r1": "alice", forked.json()["run_id"]: "dora"}
    assert refused.status_code == 400 and error_of(refused)["code"] == "PLAIT-E019"


def test_a_body_that_is_not_canonical_json_is_400_E019_and_journals_nothing(api: Api):
    api.start("account", "r1")
    ask = api.only_ask("r1")
    path = f"/runs/r1/asks/{ask['ask_id']}/respond"
    bodies = {
        '{"result": {"account": "a", "account": "b"}}': "duplicate key 'account'",
        '{"result": {"account": NaN}}': "NaN is not valid JSON",
        '{"result": {"account": "\\ud800"}}': "not valid Unicode",
    }

    for raw, words in bodies.items():
        refused = api.client.post(
            path, content=raw, headers={**api.auth, "content-type": "application/json"}
        )
        assert refused.status_code == 400, (raw, refused.text)
        error = error_of(refused)
        assert error["code"] == "PLAIT-E019" and words in error["message"], error

    assert api.only_ask("r1")["ask_id"] == ask["ask_id"]  # still waiting: nothing journaled
    right = api.post(path, {"result": {"account": "A-1"}})
    assert right.status_code == 200


def test_a_field_of_the_wrong_type_is_400_E019_not_coerced(api: Api):
    api.start("approval", "r1")
    for path, body, field in [
        ("/runs", {"workflow": api.flow("approval"), "run_id": "r2", "detach": "yes"}, "detach"),
        ("/runs", {"workflow": api.flow("approval"), "run_id": "r2", "detach": 1}, "detach"),
        ("/runs/r1/fork", {"at": "1"}, "at"),
        ("/runs/r1/fork", {"at": 1.0}, "at"),
        ("/runs/r1/fork", {"at": True}, "at"),
    ]:
        refused = api.post(path, body)
        assert refused.status_code == 400, (body, refused.text)
        assert error_of(refused)["code"] == "PLAIT-E019"
        assert f"body.{field}" in error_of(refused)["message"]
    assert [run["run_id"] for run in api.get("/runs").json()["runs"]] == ["r1"]


def test_a_run_id_holding_a_slash_is_addressed_url_encoded(api: Api):
    api.start("approval", "team/r1")
    api.start("approval", "team")
    path = "/runs/team%2Fr1"

    shown = api.get(path)
    assert shown.status_code == 200 and shown.json()["run_id"] == "team/r1"
    assert api.get(f"{path}/trace").json()["run_id"] == "team/r1"
    assert api.get(f"{path}/events").status_code == 200
    asks = api.get(f"{path}/asks").json()["asks"]
    assert [ask["run_id"] for ask in asks] == ["team/r1"]
    ask_id = asks[0]["ask_id"]
    answered = api.post(f"{path}/asks/{ask_id}/approve", {"as": "bob"})
    assert answered.status_code == 200 and answered.json()["run_id"] == "team/r1"
    # "team%2Fasks" is run "team/asks" (unknown), never the asks of run "team"
    unknown = api.get("/runs/team%2Fasks")
    assert unknown.status_code == 404
    assert error_of(unknown) == {"code": "PLAIT-E017", "message": "unknown run id 'team/asks'"}
    assert api.get("/runs/%7E").json()["error"]["message"] == "unknown run id '~'"
    assert api.get("/runs/team%252Fr1").json()["error"]["message"] == "unknown run id 'team%2Fr1'"
    assert api.get("/runs/team").json()["status"] == "parked"
