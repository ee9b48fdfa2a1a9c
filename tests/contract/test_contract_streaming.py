"""`plait run --stream` (issue #18 part 1): the answer is printed as the provider streams it;
the journal keeps the completed turn only, byte for byte what a plain run journals; a
process killed mid-stream re-sends that one turn on resume, and the run verifies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from contract.support import OWNER, PLAIT, T0, Cli, plait_process
from support.fake_provider import Answer, FakeProvider


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider().start()
    yield fake
    fake.close()


def workflow(cli: Cli, spec: str) -> str:
    llm = {"model": spec, "max_retries": 0, "max_effects_per_attempt": 8}
    text = f"name: streamed\nnodes: [{{id: agent, instruction: Greet.}}]\nllm: {json.dumps(llm)}\n"
    (cli.folder / "streamed.yaml").write_text(text)
    return "streamed.yaml"


def scripted(cli: Cli) -> str:
    (cli.folder / "answers.json").write_text('[{"text": "Hello there, streaming world."}]')
    text = (
        "name: s\nnodes: [{id: agent, instruction: Greet.}]\nllm: {model: scripted:answers.json}\n"
    )
    (cli.folder / "s.yaml").write_text(text)
    return "s.yaml"


def llm_results(cli: Cli, run_id: str) -> list[Any]:
    return [e["result"] for e in cli("trace", run_id).data["entries"] if e["kind"] == "llm"]


def test_run_stream_prints_the_answer_as_it_comes_then_the_summary(cli: Cli):
    done = cli.raw("run", cli.flow(scripted(cli)), "--stream", "--run-id", "r1", "--db", cli.db)

    assert done.exit_code == 0, done
    assert done.stdout == "Hello there, streaming world.\n"
    assert "run r1: completed" in done.stderr


def test_run_stream_json_prints_one_line_per_delta_then_the_run_object(cli: Cli):
    done = cli("run", cli.flow(scripted(cli)), "--stream", "--run-id", "r1")

    lines = [json.loads(line) for line in done.stdout.splitlines()]
    deltas = [line["delta"] for line in lines[:-1]]
    assert done.exit_code == 0, done
    assert "".join(d["text"] for d in deltas) == "Hello there, streaming world."
    assert {(d["run_id"], d["node"], d["turn"], d["kind"]) for d in deltas} == {
        ("r1", "agent", 0, "text")
    }
    assert lines[-1]["status"] == "completed"


def test_stream_with_detach_is_refused(cli: Cli):
    done = cli("run", cli.flow(scripted(cli)), "--stream", "--detach")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")
    assert cli.run_ids() == []


def test_a_streamed_run_journals_the_bytes_of_a_plain_one(cli: Cli, provider: FakeProvider):
    provider.answers = [Answer(("Hi", " there"))]
    flow = cli.flow(workflow(cli, provider.openai_spec))

    plain = cli("run", flow, "--run-id", "plain")
    streamed = cli.raw("run", flow, "--stream", "--run-id", "streamed", "--db", cli.db)

    assert plain.data["status"] == "completed" and streamed.exit_code == 0, streamed
    assert streamed.stdout == "Hi there\n"
    assert [r.get("stream", False) for r in provider.requests] == [False, True]
    assert llm_results(cli, "streamed") == llm_results(cli, "plain")
    assert cli("verify", "streamed").data["verified"] is True


def test_a_crash_mid_stream_resends_the_turn_once_on_resume(cli: Cli, provider: FakeProvider):
    provider.hold = True  # the turn stays in flight until the process is gone
    flow = cli.flow(workflow(cli, provider.openai_spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    env |= {"PLAIT_NOW_MS": str(T0), "PLAIT_PRINCIPAL": OWNER}
    args = [PLAIT, "run", flow, "--stream", "--json", "--run-id", "r1", "--db", cli.db]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env, cwd=cli.folder)
    try:
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())  # a delta while the turn is in flight
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    provider.release.set()

    resumed = cli("resume", "r1")

    assert first["delta"]["text"] == "Hello"
    assert resumed.data["status"] == "completed", resumed
    assert resumed.data["context"] == {"agent": "Hello world."}
    assert len(provider.requests) == 2  # the turn in flight, sent again exactly once
    plain = {"stream": False, "stream_options": None}
    assert provider.requests[1] | plain == provider.requests[0] | plain  # the same turn
    entries = cli("trace", "r1").data["entries"]
    assert [(e["kind"], e["redeliveries"]) for e in entries] == [("llm", 1)]
    assert cli("verify", "r1").data["verified"] is True


def test_resume_stream_prints_the_turn_it_sends_again(cli: Cli):
    flow = cli.flow(scripted(cli))
    crash = {"PLAIT_CRASH_AT": "intent:1"}  # killed with the turn journaled, not yet sent
    crashed = plait_process(
        "run", flow, "--run-id", "r1", "--db", cli.db, cwd=cli.folder, env=crash
    )
    assert crashed.returncode == -signal.SIGKILL, crashed

    done = cli.raw("resume", "r1", "--stream", "--db", cli.db)

    assert done.exit_code == 0, done
    assert done.stdout == "Hello there, streaming world.\n"
