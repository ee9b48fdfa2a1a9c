"""`GET /runs/{id}/events`: the journal as server-sent events, in seq order, ending when
the run settles; `after=` and `Last-Event-ID` resume it."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest

from http_api.support import Api
from plait.core.keys import JournalKey
from plait.server.auth import Access
from plait.server.events import journal_events
from plait.server.settings import ServerSettings
from plait.store import open_store
from plait.store.records import CheckpointMeta, IntentRecord, Journal, Record, ResultRecord


def parse(stream: str) -> list[dict]:
    """Each event as {"id", "event", "data"} (comments skipped)."""
    events = []
    for block in stream.split("\n\n"):
        fields: dict = {}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = json.loads(value) if name == "data" else value
        if fields:
            events.append(fields)
    return events


def journal_seqs(api: Api, run_id: str) -> list[int]:
    store = open_store(api.db)
    try:
        return [item.seq for item in store.load_journal(run_id).items()]
    finally:
        store.close()


def test_the_stream_of_a_finished_run_yields_every_journal_item_in_seq_order_and_ends(api: Api):
    api.start("approval", "r1")
    ask = api.only_ask("r1")
    api.post(f"/runs/r1/asks/{ask['ask_id']}/approve", {"as": "bob"})
    api.post("/runs/r1/resume")

    events = parse(api.events("r1"))

    *items, end = events
    seqs = journal_seqs(api, "r1")
    assert [int(e["id"]) for e in items] == seqs == sorted(seqs)
    assert [e["data"]["seq"] for e in items] == seqs
    assert all(e["event"] == e["data"]["type"] for e in items)
    assert {e["event"] for e in items} == {"intent", "result", "checkpoint", "record"}
    assert end == {
        "event": "end",
        "data": {"run_id": "r1", "status": "completed", "after": seqs[-1]},
    }
    answer = next(
        e["data"] for e in items if e["event"] == "result" and e["data"]["key"]["node"] == "approve"
    )
    assert answer["outcome"]["Completed"]["result"]["by"] == "bob"


def test_after_resumes_the_stream_past_a_seq(api: Api):
    api.start("question", "r1")
    seqs = journal_seqs(api, "r1")
    middle = seqs[len(seqs) // 2]

    events = parse(api.events("r1", f"?after={middle}"))

    assert [int(e["id"]) for e in events[:-1]] == [s for s in seqs if s > middle]
    assert events[-1]["data"] == {"run_id": "r1", "status": "parked", "after": seqs[-1]}


def test_last_event_id_resumes_like_after_and_after_wins(api: Api):
    api.start("question", "r1")
    seqs = journal_seqs(api, "r1")

    by_header = parse(api.events("r1", **{"Last-Event-ID": str(seqs[-2])}))
    both = parse(api.events("r1", f"?after={seqs[-3]}", **{"Last-Event-ID": str(seqs[-2])}))

    assert [int(e["id"]) for e in by_header[:-1]] == seqs[-1:]
    assert [int(e["id"]) for e in both[:-1]] == seqs[-2:]


def test_a_parked_runs_stream_ends_and_a_later_one_follows_it_on(api: Api):
    api.start("question", "r1")
    first = parse(api.events("r1"))
    last = first[-1]["data"]["after"]
    ask = api.only_ask("r1")
    api.post(f"/runs/r1/asks/{ask['ask_id']}/respond", {"result": {"note": "done"}})
    api.post("/runs/r1/resume")

    second = parse(api.events("r1", f"?after={last}"))

    assert first[-1]["data"]["status"] == "parked"
    assert second[-1]["data"]["status"] == "completed"
    assert [int(e["id"]) for e in first[:-1] + second[:-1]] == journal_seqs(api, "r1")


@pytest.mark.parametrize("seq", ["99999999999999999999", "-99999999999999999999"])
def test_a_seq_no_store_can_hold_starts_after_everything_or_at_the_beginning(api: Api, seq):
    api.start("question", "r1")
    seqs = journal_seqs(api, "r1")

    by_query = parse(api.events("r1", f"?after={seq}"))
    by_header = parse(api.events("r1", **{"Last-Event-ID": seq}))

    sent = [] if seq[0] != "-" else seqs
    assert [int(e["id"]) for e in by_query[:-1]] == [int(e["id"]) for e in by_header[:-1]] == sent
    assert by_query[-1]["event"] == by_header[-1]["event"] == "end"


def test_a_bad_last_event_id_is_400_E019(api: Api):
    api.start("question", "r1")

    response = api.get("/runs/r1/events", headers={"Last-Event-ID": "seven"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "PLAIT-E019"


# -- the poll loop, on a store whose run moves between two reads -------------------------


@dataclass
class MovingStore:
    """A store whose run is 'running' for the first reads, then completes."""

    statuses: list[str]
    journals: list[Journal]
    closed: bool = False
    reads: list[str] = field(default_factory=list)

    def get_run(self, run_id: str):
        self.reads.append("status")
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return type("Info", (), {"status": status})()

    def load_journal(self, run_id: str, after_seq: int = 0) -> Journal:
        self.reads.append("journal")
        whole = self.journals.pop(0) if len(self.journals) > 1 else self.journals[0]
        return Journal(
            run_id,
            intents=[i for i in whole.intents if i.seq > after_seq],
            results={k: r for k, r in whole.results.items() if r.seq > after_seq},
            records=[r for r in whole.records if r.seq > after_seq],
            checkpoints=[c for c in whole.checkpoints if c.seq > after_seq],
        )

    def manifests(self, run_id: str) -> list[dict]:
        return [{"workflow": {"nodes": [{"id": "a"}]}}]

    def checkpoint_beside(self, run_id: str, seq: int, *, later: bool) -> None:
        return None  # none: each effect is in its node's first pass

    def close(self) -> None:
        self.closed = True


def test_the_stream_polls_while_the_run_moves_and_ends_once_it_settles():
    key = JournalKey("r1", "", "a", 1, 1, "tool")
    intent = IntentRecord(1, key, "t", {}, 1, 0, "k")
    result = ResultRecord(2, key, {"Completed": {"result": {}}}, 5, 2)
    checkpoint = CheckpointMeta(3, 1, "ab", 10)
    outcome = Record(4, "outcome", {"outcome": "Completed"})
    store = MovingStore(
        statuses=["running", "running", "running", "completed"],
        journals=[
            Journal("r1", intents=[intent]),
            Journal("r1", intents=[intent]),  # nothing new: the stream waits a poll
            Journal("r1", [intent], {key: result}, [], [checkpoint]),
            Journal("r1", [intent], {key: result}, [outcome], [checkpoint]),
        ],
    )
    settings = ServerSettings("unused", Access("t", "p"), poll_s=0.0, heartbeat_s=0.0)

    async def collect() -> list[str]:
        return [frame async for frame in journal_events(settings, store, "r1", 0)]

    frames = asyncio.run(collect())

    data = [f for f in frames if not f.startswith(":")]
    assert [parse(f)[0]["data"].get("seq") for f in data] == [1, 2, 3, 4, None]
    assert parse(data[-1])[0] == {
        "event": "end",
        "data": {"run_id": "r1", "status": "completed", "after": 4},
    }
    assert any(f.startswith(":") for f in frames)  # a heartbeat while nothing moved
    assert store.reads[:2] == ["status", "journal"]  # the status is read before the journal
    assert store.closed


def test_the_stream_of_a_moving_run_closes_without_end_when_the_server_stops():
    store = MovingStore(statuses=["running"], journals=[Journal("r1")])
    settings = ServerSettings(
        "unused", Access("t", "p"), poll_s=0.0, heartbeat_s=0.0, stopping=lambda: True
    )

    async def collect() -> list[str]:
        return [frame async for frame in journal_events(settings, store, "r1", 0)]

    frames = asyncio.run(collect())

    assert frames == []  # no `end`: the run has not settled; the client reconnects later
    assert store.closed
