"""The schedule routes answer what ``plait schedule ... --json`` prints, with the CLI's
error codes as HTTP statuses (E019 400, E017 404, E016 409)."""

from __future__ import annotations

from http_api.support import Api


def test_schedules_over_http_add_list_pause_resume_delete(api: Api) -> None:
    body = {"name": "tick", "workflow": api.flow("question"), "every": "1m", "input": {"x": 1}}
    added = api.post("/schedules", body)
    assert added.status_code == 200, added.text
    assert added.json()["accepted"] is True and added.json()["name"] == "tick"
    (listed,) = api.get("/schedules").json()["schedules"]
    assert (listed["every_ms"], listed["input"], listed["paused"]) == (60_000, {"x": 1}, False)
    assert api.post("/schedules/tick/pause").json() == {
        "name": "tick", "accepted": True, "paused": True,
    }  # fmt: skip
    assert api.post("/schedules/tick/resume").json()["paused"] is False
    taken = api.post("/schedules", body)
    assert (taken.status_code, taken.json()["error"]["code"]) == (409, "PLAIT-E016")
    deleted = api.client.delete("/schedules/tick", headers=api.auth)
    assert deleted.json() == {"name": "tick", "accepted": True, "deleted": True}
    gone = api.post("/schedules/tick/pause")
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "PLAIT-E017")


def test_a_bad_cron_over_http_is_400_naming_the_field(api: Api) -> None:
    body = {"name": "tick", "workflow": api.flow("question"), "cron": "* * *"}
    refused = api.post("/schedules", body)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "PLAIT-E019" and error["message"].startswith("cron '* * *'")
    unknown_tz = api.post("/schedules", {**body, "cron": "0 9 * * *", "timezone": "Moon/Base"})
    assert unknown_tz.json()["error"]["message"] == "timezone 'Moon/Base': unknown time zone"
    assert api.get("/schedules").json() == {"schedules": []}


def test_sync_over_http_registers_the_files_schedules(api: Api) -> None:
    flow = api.folder / "scheduled.yaml"
    flow.write_text(
        (api.folder / "question.yaml").read_text()
        + "schedules:\n  - {name: daily, cron: '0 9 * * 1-5', timezone: America/New_York}\n"
    )
    synced = api.post("/schedules/sync", {"workflow": str(flow)})
    assert synced.status_code == 200, synced.text
    assert synced.json()["added"] == ["daily"]
    (listed,) = api.get("/schedules").json()["schedules"]
    assert (listed["origin"], listed["timezone"]) == ("file", "America/New_York")
