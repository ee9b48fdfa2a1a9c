"""What a summarizer effect (§6.5) sends to the model: the folded range as ONE user message.

A fold range starts with the model's first answer (an assistant entry) and holds tool
calls with their results; sent as a conversation, a provider refuses it (Anthropic: the
first message must be the user's) or carries on with the task. The journaled intent is
unchanged (``{"fold": [a, b], "messages": [...]}``); only the request is built this way.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from plait.core.events import Dispatch
from plait.core.keys import JournalKey
from plait.core.outcomes import Completed
from plait.driver.llm_exec import SUMMARIZE, LlmRunner
from plait.models.base import ModelRequest, ModelResponse

FOLDED = [
    {
        "role": "assistant",
        "text": None,
        "tool_calls": [{"id": "call_1", "name": "lookup", "arguments": {"q": "a"}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": {"found": True}, "is_error": False},
]
FIRST = {"role": "user", "content": {"instruction": "Look things up.", "context": {}}}


class Recorder:
    """A model that records the requests it gets and answers with a fixed text."""

    spec = "recorder:test"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(text="a was found", input_tokens=7, output_tokens=3)


def ask(value: dict[str, Any]) -> tuple[ModelRequest, Any]:
    model = Recorder()
    definition: Any = SimpleNamespace(llm={}, tools={}, tool_schemas={}, pinned={})
    runner = LlmRunner(definition, model, [])
    key = JournalKey("run", "", "agent", 1, 3, "llm")
    outcome = asyncio.run(runner(Dispatch(key, "llm", value)))
    (request,) = model.requests
    return request, outcome


def test_a_summarizer_request_is_one_user_message_holding_the_folded_entries() -> None:
    request, outcome = ask({"fold": [1, 3], "messages": FOLDED})
    assert isinstance(outcome, Completed) and outcome.result["text"] == "a was found"
    (message,) = request.messages
    assert message["role"] == "user"
    _header, *lines = message["content"].split("\n")
    assert [json.loads(line) for line in lines] == FOLDED
    assert request.instructions == SUMMARIZE
    assert request.tools == () and request.response_schema is None


def test_an_anthropic_summarizer_request_starts_with_the_user() -> None:
    from plait.models.anthropic import messages_request

    request, _ = ask({"fold": [1, 3], "messages": FOLDED})
    params = messages_request(request, "claude-test")
    assert [m["role"] for m in params["messages"]] == ["user"]
    assert "tools" not in params


def test_a_turn_request_is_the_transcript_itself() -> None:
    transcript = [FIRST, *FOLDED]
    request, _ = ask({"messages": transcript, "tools": []})
    assert list(request.messages) == transcript
    assert request.instructions is None
