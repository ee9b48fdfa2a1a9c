"""Conversations of ``Agent`` runs (issue #18 part 2) against the loopback fake provider:
the next run of a conversation *sends* the earlier runs' messages, by reference (the
history is stored as the earlier runs' nodes, not copied), folds when too long, survives
a crash and verifies byte for byte; ``message_history=`` does the same from a result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Agent
from plait.core.errors import PlaitError
from support.fake_provider import Answer, Call, FakeProvider


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(answers=[Answer(("first answer",)), Answer(("second answer",))]).start()
    yield fake
    fake.close()


def agent(provider: FakeProvider, tmp_path: Path, **settings: Any) -> Agent[Any]:
    return Agent(
        provider.openai_spec,
        instructions="Be brief.",
        db=f"sqlite:///{tmp_path / 'plait.db'}",
        model_settings={"max_retries": 0, **settings},
        telemetry=False,
    )


def sent_texts(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request["messages"]]


def test_the_second_run_of_a_conversation_sends_the_first_runs_messages(
    provider: FakeProvider, tmp_path: Path
):
    with agent(provider, tmp_path) as bot:
        first = bot.run_sync("What is plait?", conversation_id="c1", run_id="t1")
        second = bot.run_sync("And durable?", conversation_id="c1", run_id="t2")

    assert (first.output, second.output) == ("first answer", "second answer")
    one, two = provider.requests
    assert any("What is plait?" in t for t in sent_texts(two))
    assert any("first answer" in t for t in sent_texts(two))
    assert sent_texts(two)[: len(sent_texts(one))] == sent_texts(one)
    assert "And durable?" in sent_texts(two)[-1]
    assert second.message_history[: len(first.message_history)] == first.message_history
    assert second.conversation_id == "c1"


def test_a_run_of_another_conversation_sends_none_of_them(provider: FakeProvider, tmp_path: Path):
    with agent(provider, tmp_path) as bot:
        bot.run_sync("What is plait?", conversation_id="c1", run_id="t1")
        bot.run_sync("Hello", conversation_id="c2", run_id="u1")

    assert not any("What is plait?" in t for t in sent_texts(provider.requests[1]))


def test_message_history_from_a_result_is_sent(provider: FakeProvider, tmp_path: Path):
    with agent(provider, tmp_path) as bot:
        first = bot.run_sync("What is plait?", run_id="t1")
        again = bot.run_sync("And durable?", message_history=first.all_messages(), run_id="t2")

    assert any("first answer" in t for t in sent_texts(provider.requests[1]))
    assert again.all_messages()[: len(first.message_history)] == first.all_messages()


def test_a_continuation_verifies_against_the_history_it_started_with(
    provider: FakeProvider, tmp_path: Path
):
    with agent(provider, tmp_path) as bot:
        bot.run_sync("one", conversation_id="c1", run_id="t1")
        bot.run_sync("two", conversation_id="c1", run_id="t2")
        bot.run_sync("three", conversation_id="c1", run_id="t3")  # a later turn changes nothing
        report = bot.verify("t2")
        manifest = bot._open_store().manifests("t2")[0]

    assert report.verified and report.checkpoints > 0, report
    history = manifest["input"]["$history"]
    assert history["runs"] == ["t1"] and history["conversation"] == "c1"
    assert len(history["sha256"]) == 64


def test_the_history_is_stored_by_reference_not_copied(provider: FakeProvider, tmp_path: Path):
    big = "x" * 20_000
    provider.answers = [Answer((big,)), Answer(("short",))]
    with agent(provider, tmp_path) as bot:
        bot.run_sync("tell me a lot", conversation_id="c1", run_id="t1")
        bot.run_sync("thanks", conversation_id="c1", run_id="t2")
        store = bot._open_store()
        first, second = store.stored_bytes("t1"), store.stored_bytes("t2")

    assert any(big in t for t in sent_texts(provider.requests[1]))
    assert first > 20_000
    assert second < 10_000  # the 20 kB answer is t1's node, referenced by t2


def test_a_failed_run_is_left_out_and_a_blank_id_refused(provider: FakeProvider, tmp_path: Path):
    with agent(provider, tmp_path, max_effects_per_attempt=1) as bot:
        bot.run_sync("one", conversation_id="c1", run_id="t1")
        provider.answers = [Answer(calls=(Call("nope", {}),)), Answer(("three",))]
        failed = bot.run_sync("two", conversation_id="c1", run_id="t2")
        third = bot.run_sync("three", conversation_id="c1", run_id="t3")
        with pytest.raises(PlaitError) as refused:
            bot.run_sync("four", conversation_id="   ", run_id="t4")
        manifest = bot._open_store().manifests("t3")[0]

    assert failed.metadata["run_status"] == "failed" and third.output == "three"
    assert manifest["input"]["$history"]["runs"] == ["t1"]
    assert not any(t == "two" for t in sent_texts(provider.requests[-1]))
    assert refused.value.code == "E031"


def test_a_long_conversation_folds_before_the_next_turn(provider: FakeProvider, tmp_path: Path):
    provider.answers = [
        Answer(("first answer",), input_tokens=900),
        Answer(("second answer",), input_tokens=900),
        Answer(("a summary of it all",)),
        Answer(("third answer",)),
        Answer(("fourth answer",)),
    ]
    with agent(provider, tmp_path, context_tokens=500) as bot:
        bot.run_sync("What is plait?", conversation_id="c1", run_id="t1")
        bot.run_sync("Tell me more.", conversation_id="c1", run_id="t2")  # nothing to fold yet
        third = bot.run_sync("And durable?", conversation_id="c1", run_id="t3")
        bot.run_sync("Thanks.", conversation_id="c1", run_id="t4")
        report = bot.verify("t3")

    _, second, summarize, turn, fourth = provider.requests
    assert "The conversation to summarize" in sent_texts(summarize)[-1]
    assert "first answer" in sent_texts(summarize)[-1]
    assert any("[Summary 1 of" in t for t in sent_texts(turn))
    assert not any("first answer" in t for t in sent_texts(turn))
    assert len(turn["messages"]) < len(second["messages"]) + 2
    # the next run goes on from the folded transcript, not the whole one again
    assert any("[Summary 1 of" in t for t in sent_texts(fourth))
    assert third.output == "third answer" and report.verified


def run_turn(tmp_path: Path, spec: str, *args: str, crash: str = "") -> Any:
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PLAIT_CRASH_AT": crash}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "turn_script.py"),
         f"sqlite:///{tmp_path / 'plait.db'}", spec, *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else done.stderr


@pytest.mark.parametrize("crash", ["intent:1", "result:1"])
def test_a_continuation_that_crashed_resumes_with_its_history_and_verifies(
    provider: FakeProvider, tmp_path: Path, crash: str
):
    spec = provider.openai_spec
    assert run_turn(tmp_path, spec, "start", "t1", "c1", "What is plait?")[0] == 0
    code, _ = run_turn(tmp_path, spec, "start", "t2", "c1", "And durable?", crash=crash)
    assert code < 0  # killed at the boundary
    code, resumed = run_turn(tmp_path, spec, "resume", "t2")
    code_v, verified = run_turn(tmp_path, spec, "verify", "t2")

    assert code == 0 and resumed["status"] == "Completed", resumed
    assert code_v == 0 and verified["verified"] and verified["up_to"] == "terminal", verified
    last = provider.requests[-1]
    assert any("first answer" in t for t in sent_texts(last))
    assert "And durable?" in sent_texts(last)[-1]
    # intent:1 died before the turn was sent, result:1 after: one request, or that one again
    assert len(provider.requests) == (2 if crash == "intent:1" else 3)
