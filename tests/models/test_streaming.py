"""Streamed turns (issue #18 part 1): the adapters send ``stream`` requests to a provider on
loopback, tell each piece as it arrives — before the turn is complete — and return exactly
the response a plain request with the same content gives, so the journal cannot tell."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from plait.models import Delta, ModelError, ModelRequest, ScriptedModel
from plait.models.anthropic import AnthropicModel
from plait.models.base import ToolSpec
from plait.models.openai import OpenAIModel
from support.fake_provider import Answer, Call, FakeProvider

TEXT = Answer(("Hel", "lo, ", "wor", "ld."))
CALLS = Answer(
    ("Let me look.",),
    calls=(Call("lookup", {"q": "refund policy", "n": 2}), Call("add", {"a": 1}, id="call_2")),
)
THINKING = Answer(("42",), thinking=("Six times ", "seven."))
LOOKUP = ToolSpec("lookup", "Look it up.", {"type": "object"})


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider().start()
    yield fake
    fake.close()


def openai(provider: FakeProvider) -> OpenAIModel:
    return OpenAIModel("fake", base_url=f"{provider.url}/v1", compatible=True)


def anthropic(provider: FakeProvider) -> AnthropicModel:
    client = AsyncAnthropic(base_url=provider.url, api_key="test", max_retries=0)
    return AnthropicModel("fake", client=client)


ADAPTERS = {"openai": openai, "anthropic": anthropic}


def plain_and_streamed(
    make: Callable[[FakeProvider], Any], provider: FakeProvider, request: ModelRequest
) -> tuple[dict[str, Any], dict[str, Any], list[Delta]]:
    deltas: list[Delta] = []

    async def both() -> tuple[Any, Any]:
        model = make(provider)
        try:
            plain = await model.complete(request)
            streamed = await model.stream(request, deltas.append)
        finally:
            await model.aclose()
        return plain, streamed

    plain, streamed = asyncio.run(both())
    return plain.to_json(), streamed.to_json(), deltas


@pytest.mark.parametrize("api", ADAPTERS)
@pytest.mark.parametrize("answer", [TEXT, CALLS, THINKING], ids=["text", "calls", "thinking"])
def test_a_streamed_turn_returns_the_bytes_of_a_plain_one(
    provider: FakeProvider, turn: Callable[..., ModelRequest], api: str, answer: Answer
):
    provider.answers = [answer]
    request = turn(tools=(LOOKUP,))

    plain, streamed, deltas = plain_and_streamed(ADAPTERS[api], provider, request)

    assert streamed == plain
    assert [r.get("stream", False) for r in provider.requests] == [False, True]
    text = "".join(d.text for d in deltas if d.kind == "text")
    assert text == (answer.text or "")
    assert "".join(d.text for d in deltas if d.kind == "thinking") == "".join(answer.thinking)
    for index, call in enumerate(answer.calls):
        pieces = [d for d in deltas if d.kind == "tool_call" and d.index == index]
        assert {d.name for d in pieces} == {call.name}
        assert "".join(d.text for d in pieces) == json.dumps(call.arguments)


def test_openai_streams_with_usage_included(provider: FakeProvider, turn: Callable[..., Any]):
    plain, streamed, _ = plain_and_streamed(openai, provider, turn())

    sent = provider.requests[-1]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert streamed["usage"] == {"input_tokens": 11, "output_tokens": 7} == plain["usage"]


@pytest.mark.parametrize("api", ADAPTERS)
def test_deltas_arrive_before_the_turn_completes(
    provider: FakeProvider, turn: Callable[..., ModelRequest], api: str
):
    # The fake keeps the stream's last chunk until the test has seen a delta.
    provider.hold = True
    seen: list[Delta] = []

    def on_delta(delta: Delta) -> None:
        seen.append(delta)
        provider.release.set()

    async def streamed() -> Any:
        model = ADAPTERS[api](provider)
        try:
            return await model.stream(turn(), on_delta)
        finally:
            await model.aclose()

    response = asyncio.run(streamed())

    assert provider.held_until_released == [True]
    assert response.text == "Hello world." and seen[0] == Delta("text", "Hello")


def test_a_server_that_cannot_stream_fails_the_streamed_turn_saying_so(
    provider: FakeProvider, turn: Callable[..., ModelRequest]
):
    provider.ignore_stream = True

    async def streamed() -> Any:
        model = openai(provider)
        try:
            return await model.stream(turn(), lambda delta: None)
        finally:
            await model.aclose()

    with pytest.raises(ModelError) as failed:
        asyncio.run(streamed())

    assert failed.value.cause == "ExecutorError"  # re-sent by the loop, like any unusable answer
    assert "does the server support stream: true?" in failed.value.detail


def test_the_scripted_model_streams_its_answer_in_pieces(turn: Callable[..., ModelRequest]):
    script = '[{"text": "One two  three.", "tool_calls": [{"name": "t", "arguments": {"k": "v"}}]}]'
    model = ScriptedModel.parse("scripted:a.json", script)
    deltas: list[Delta] = []

    streamed = asyncio.run(model.stream(turn(), deltas.append))

    assert streamed == asyncio.run(model.complete(turn()))
    texts = [d.text for d in deltas if d.kind == "text"]
    assert texts == ["One ", "two  ", "three."]
    arguments = [d for d in deltas if d.kind == "tool_call"]
    assert "".join(d.text for d in arguments) == '{"k":"v"}' and len(arguments) > 2
    assert {(d.index, d.name) for d in arguments} == {(0, "t")}
