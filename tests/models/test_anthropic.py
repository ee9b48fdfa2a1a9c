"""The Anthropic adapter against recorded Messages exchanges (respx; no network).

Response bodies are built from the SDK's own types, so they are what the SDK parses.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from anthropic import AsyncAnthropic
from anthropic.types import Message, TextBlock, ToolUseBlock, Usage

from plait.models import ModelError, ToolSpec
from plait.models.anthropic import SCHEMA_INSTRUCTION, AnthropicModel

from .conftest import bridged_client

URL = "https://api.anthropic.com/v1/messages"
LOOKUP = ToolSpec(
    "lookup_order",
    "Find an order by its number.",
    {"type": "object", "properties": {"order": {"type": "integer"}}, "required": ["order"]},
)
TRANSCRIPT = [
    {"role": "user", "content": {"instruction": "Refund order 7.", "context": {"b": 1, "a": 2}}},
    {
        "role": "assistant",
        "text": "Looking it up.",
        "tool_calls": [
            {"id": "toolu_1", "name": "lookup_order", "arguments": {"order": 7}},
            {"id": "toolu_2", "name": "issue_refund", "arguments": {}},
        ],
    },
    {"role": "tool", "tool_call_id": "toolu_1", "content": {"total": 30}, "is_error": False},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "refunds are closed", "is_error": True},
    {"role": "user", "content": "Please stay polite."},
]


def message(content, stop="end_turn", usage=None) -> dict:
    body = Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-sonnet-4-20250514",
        content=content,
        stop_reason=stop,
        stop_sequence=None,
        usage=usage or Usage(input_tokens=30, output_tokens=9),
    )
    return body.model_dump(mode="json", exclude_none=True)


def adapter(router) -> AnthropicModel:
    client = AsyncAnthropic(api_key="test-key", max_retries=0, http_client=bridged_client(router))
    return AnthropicModel("claude-sonnet-4-0", client=client)


def run(model: AnthropicModel, request):
    return asyncio.run(model.complete(request))


def failure(model: AnthropicModel, request) -> ModelError:
    with pytest.raises(ModelError) as caught:
        run(model, request)
    return caught.value


def test_a_text_answer_maps_text_usage_stop_reason_and_model(router, turn):
    body = message([TextBlock(type="text", text="All "), TextBlock(type="text", text="done.")])
    route = router.post(URL).mock(return_value=httpx.Response(200, json=body))

    response = run(adapter(router), turn())

    assert "temperature" not in json.loads(
        route.calls.last.request.content
    )  # newer models refuse it
    assert response.text == "All done."
    assert response.tool_calls == ()
    assert response.usage == {"input_tokens": 30, "output_tokens": 9}
    assert (response.stop_reason, response.model) == ("end_turn", "claude-sonnet-4-20250514")


def test_tool_uses_come_back_as_tool_calls(router, turn):
    body = message(
        [
            TextBlock(type="text", text="Let me check."),
            ToolUseBlock(type="tool_use", id="toolu_9", name="lookup_order", input={"order": 7}),
        ],
        stop="tool_use",
    )
    router.post(URL).mock(return_value=httpx.Response(200, json=body))

    response = run(adapter(router), turn(tools=(LOOKUP,)))

    assert response.text == "Let me check."
    assert response.tool_calls == (
        {"id": "toolu_9", "name": "lookup_order", "arguments": {"order": 7}},
    )
    assert response.stop_reason == "tool_use"


def test_cached_prompt_tokens_count_as_input(router, turn):
    usage = Usage(
        input_tokens=10,
        output_tokens=2,
        cache_read_input_tokens=900,
        cache_creation_input_tokens=90,
    )
    router.post(URL).mock(
        return_value=httpx.Response(
            200, json=message([TextBlock(type="text", text="x")], usage=usage)
        )
    )

    assert run(adapter(router), turn()).input_tokens == 1000


def test_the_request_carries_tools_schemas_and_the_converted_transcript(router, turn):
    route = router.post(URL).mock(
        return_value=httpx.Response(200, json=message([TextBlock(type="text", text="ok")]))
    )
    request = turn(
        TRANSCRIPT, tools=(LOOKUP,), max_tokens=256, temperature=0.0, instructions="Be brief."
    )

    run(adapter(router), request)

    body = json.loads(route.calls.last.request.content)
    assert (body["model"], body["max_tokens"], body["temperature"]) == (
        "claude-sonnet-4-0",
        256,
        0.0,
    )
    assert body["system"] == "Be brief."
    assert body["tools"] == [
        {
            "name": "lookup_order",
            "description": "Find an order by its number.",
            "input_schema": dict(LOOKUP.input_schema),
        }
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": '{"context":{"a":2,"b":1},"instruction":"Refund order 7."}',
                }
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking it up."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "lookup_order",
                    "input": {"order": 7},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "issue_refund", "input": {}},
            ],
        },
        # tool results and the next user entry share one user message: roles must alternate
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"total":30}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "refunds are closed",
                    "is_error": True,
                },
                {"type": "text", "text": "Please stay polite."},
            ],
        },
    ]


def test_a_response_schema_is_asked_for_in_the_system_text_and_fences_are_unwrapped(router, turn):
    schema = {"type": "object", "required": ["decision"]}
    answer = '```json\n{"decision": "refund"}\n```'
    route = router.post(URL).mock(
        return_value=httpx.Response(200, json=message([TextBlock(type="text", text=answer)]))
    )

    response = run(adapter(router), turn(instructions="Be brief.", response_schema=schema))

    system = json.loads(route.calls.last.request.content)["system"]
    assert (
        system == "Be brief.\n\n" + SCHEMA_INSTRUCTION + '{"required":["decision"],"type":"object"}'
    )
    assert response.text == '{"decision": "refund"}'


def test_a_timeout_the_sdk_gave_up_on_is_a_ProviderError_naming_the_endpoint(router, turn):
    router.post(URL).mock(side_effect=httpx.ReadTimeout("read timed out"))

    failed = failure(adapter(router), turn())

    assert failed.cause == "ProviderError"  # the SDK's retries are spent: not sent again
    assert failed.detail.startswith("provider anthropic at https://api.anthropic.com, model ")
    assert "APITimeoutError" in failed.detail


def test_a_prompt_too_long_error_is_ContextTooLong(router, turn):
    error = {
        "type": "invalid_request_error",
        "message": "prompt is too long: 215000 tokens > 200000 maximum",
    }
    router.post(URL).mock(return_value=httpx.Response(400, json={"type": "error", "error": error}))

    failed = failure(adapter(router), turn())

    assert failed.cause == "ContextTooLong"
    assert "prompt is too long" in failed.detail


def test_an_answer_stopped_by_a_full_context_window_is_ContextTooLong(router, turn):
    body = message([TextBlock(type="text", text="cut of")], stop="model_context_window_exceeded")
    router.post(URL).mock(return_value=httpx.Response(200, json=body))

    assert failure(adapter(router), turn()).cause == "ContextTooLong"


def test_other_bad_requests_and_server_errors_are_ProviderErrors(router, turn):
    router.post(URL).mock(
        side_effect=[
            httpx.Response(
                400,
                json={
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "tools.0: bad"},
                },
            ),
            httpx.Response(
                500, json={"type": "error", "error": {"type": "api_error", "message": "boom"}}
            ),
        ]
    )
    model = adapter(router)

    first, second = failure(model, turn()), failure(model, turn())

    assert (first.cause, second.cause) == ("ProviderError", "ProviderError")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [("application/json", "{not json"), ("text/html", "<html>bad gateway</html>")],
)
def test_an_answer_that_is_not_json_is_ExecutorError(router, turn, content_type, body):
    router.post(URL).mock(
        return_value=httpx.Response(200, content=body, headers={"content-type": content_type})
    )

    failed = failure(adapter(router), turn())

    assert failed.cause == "ExecutorError"
    assert failed.detail.startswith("the provider's answer is not JSON")


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, "authentication_error"), (403, "permission_error"), (404, "not_found_error")],
)
def test_a_rejected_key_or_model_fails_the_node_at_once(router, turn, status, kind):
    error = {"type": "error", "error": {"type": kind, "message": "no"}}
    route = router.post(URL).mock(return_value=httpx.Response(status, json=error))

    failed = failure(adapter(router), turn())

    assert failed.cause == "ProviderError"  # the loop does not send it again
    assert str(status) in failed.detail
    assert route.call_count == 1
