"""``delta`` events (issue #18 part 1): while a client follows a run's event stream, the
turn this server drives streams from the provider and each piece reaches the client
before the turn completes; the journal events that follow are those of a plain turn."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from http_api.support import TOKEN
from plait.driver.runtime import Runtime
from plait.server import create_app
from plait.workflow import load_workflow
from support.fake_provider import FakeProvider
from workers.support import wait_for

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(hold=True).start()
    yield fake
    fake.close()


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """An API-only server in this process (heartbeats every poll: the stream is open)."""
    for name in ("PLAIT_DB", "PLAIT_NOW_MS", "PLAIT_CRASH_AT", "PLAIT_SERVE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    db = f"sqlite:///{tmp_path}/plait.db"
    app = create_app(TOKEN, db=db, poll_s=0.05, heartbeat_s=0.0, workflows=tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    wait_for(lambda: uv.started, "the server")
    yield f"http://127.0.0.1:{port}", db
    uv.should_exit = True
    thread.join(timeout=60)


def queue_run(db: str, provider: FakeProvider, folder: Path) -> None:
    """Run r1 of a one-node workflow on ``provider``, queued for someone to drive."""
    llm = {"model": provider.openai_spec, "max_retries": 0}
    flow = folder / "greet.yaml"
    flow.write_text(
        f"name: greet\nnodes: [{{id: agent, instruction: Hi.}}]\nllm: {json.dumps(llm)}\n"
    )
    with Runtime(db) as rt:
        asyncio.run(rt.enqueue(load_workflow(str(flow)), None, run_id="r1"))


def frames(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """(event, data) per SSE frame; a comment (heartbeat) is ("comment", None)."""
    event = None
    for line in lines:
        if line.startswith(":"):
            yield "comment", None
        elif line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: ") and event is not None:
            yield event, json.loads(line[len("data: ") :])
            event = None


def test_a_followed_run_streams_delta_events_before_its_turn_completes(
    server: tuple[str, str], provider: FakeProvider, tmp_path: Path
):
    url, db = server
    queue_run(db, provider, tmp_path)
    seen: list[tuple[str, dict[str, Any] | None]] = []
    resumed: list[httpx.Response] = []

    def resume() -> None:
        resumed.append(httpx.post(f"{url}/runs/r1/resume", headers=HEADERS, timeout=120))

    driving = threading.Thread(target=resume)
    with httpx.stream("GET", f"{url}/runs/r1/events", headers=HEADERS, timeout=120) as stream:
        for event, data in frames(stream.iter_lines()):
            seen.append((event, data))
            if event == "comment" and not driving.is_alive() and not resumed:
                driving.start()  # the stream is subscribed: drive the run now
            if event == "delta":
                provider.release.set()  # the turn may complete now
            if event == "end":
                break
    driving.join(timeout=120)

    assert resumed[0].status_code == 200 and resumed[0].json()["status"] == "completed"
    assert provider.held_until_released == [True]  # a delta reached us mid-turn
    events = [e for e, _ in seen if e != "comment"]
    deltas = [d for e, d in seen if e == "delta" and d is not None]
    assert "".join(d["text"] for d in deltas) == "Hello world."
    assert {(d["run_id"], d["node"], d["turn"], d["kind"]) for d in deltas} == {
        ("r1", "agent", 0, "text")
    }
    llm_result = next(
        i for i, (e, d) in enumerate(seen) if e == "result" and d and d["key"]["kind"] == "llm"
    )
    assert events.index("delta") < events.index("result")
    assert all(e != "delta" for e, _ in seen[llm_result:])
    assert provider.requests[0]["stream"] is True


def test_a_run_nobody_follows_is_driven_with_plain_requests(
    server: tuple[str, str], provider: FakeProvider, tmp_path: Path
):
    url, db = server
    provider.hold = False
    queue_run(db, provider, tmp_path)

    done = httpx.post(f"{url}/runs/r1/resume", headers=HEADERS, timeout=120)

    assert done.json()["status"] == "completed"
    assert [r.get("stream", False) for r in provider.requests] == [False]
