"""The OpenAI adapter against recorded chat-completions exchanges (respx; no network).

Response bodies are built from the SDK's own types, so they are what the SDK parses.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from openai import AsyncOpenAI
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
)
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.completion_usage import CompletionUsage

from plait.models import ModelError, ToolSpec
from plait.models.base import AdapterSettings
from plait.models.openai import OpenAIModel

from .conftest import bridged_client

URL = "https://api.openai.com/v1/chat/completions"
LOOKUP = ToolSpec(
    "lookup_order",
    "Find an order by its number.",
    {"type": "object", "properties": {"order": {"type": "integer"}}, "required": ["order"]},
    strict=True,
)
REFUND = ToolSpec("issue_refund", "", {"type": "object", "properties": {}})
TRANSCRIPT = [
    {"role": "user", "content": {"instruction": "Refund order 7.", "context": {"b": 1, "a": 2}}},
    {
        "role": "assistant",
        "text": "Looking it up.",
        "tool_calls": [{"id": "call_1", "name": "lookup_order", "arguments": {"order": 7}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": {"total": 30}, "is_error": False},
    {
        "role": "assistant",
        "text": None,
        "tool_calls": [{"id": "call_2", "name": "issue_refund", "arguments": {}}],
    },
    {"role": "tool", "tool_call_id": "call_2", "content": "refunds are closed", "is_error": True},
]


def completion(message: ChatCompletionMessage, finish: str = "stop", usage=(21, 7)) -> dict:
    body = ChatCompletion(
        id="chatcmpl-1",
        object="chat.completion",
        created=1_700_000_000,
        model="gpt-4o-mini-2024-07-18",
        choices=[Choice(index=0, finish_reason=finish, message=message)],
        usage=CompletionUsage(
            prompt_tokens=usage[0], completion_tokens=usage[1], total_tokens=sum(usage)
        ),
    )
    return body.model_dump(mode="json", exclude_none=True)


def tool_call(call_id: str, name: str, arguments: str) -> ChatCompletionMessageFunctionToolCall:
    return ChatCompletionMessageFunctionToolCall(
        id=call_id, type="function", function=Function(name=name, arguments=arguments)
    )


def adapter(router, *, retries: int = 0, compatible: bool = False) -> OpenAIModel:
    base_url = "http://localhost:11434/v1" if compatible else "https://api.openai.com/v1"
    client = AsyncOpenAI(
        api_key="sk-test",
        base_url=base_url,
        max_retries=retries,
        http_client=bridged_client(router),
    )
    return OpenAIModel(
        "llama3.1:8b" if compatible else "gpt-4o-mini",
        base_url=base_url if compatible else None,
        compatible=compatible,
        settings=AdapterSettings(max_retries=retries),
        client=client,
    )


def run(model: OpenAIModel, request):
    return asyncio.run(model.complete(request))


def failure(model: OpenAIModel, request) -> ModelError:
    with pytest.raises(ModelError) as caught:
        run(model, request)
    return caught.value


def sent(route) -> dict:
    return json.loads(route.calls.last.request.content)


def test_a_text_answer_maps_text_usage_stop_reason_and_model(router, turn):
    message = ChatCompletionMessage(role="assistant", content="All done.")
    router.post(URL).mock(return_value=httpx.Response(200, json=completion(message)))

    response = run(adapter(router), turn())

    assert response.text == "All done."
    assert response.tool_calls == ()
    assert response.usage == {"input_tokens": 21, "output_tokens": 7}
    assert (response.stop_reason, response.model) == ("stop", "gpt-4o-mini-2024-07-18")


def test_tool_calls_come_back_with_parsed_arguments(router, turn):
    message = ChatCompletionMessage(
        role="assistant",
        content=None,
        tool_calls=[
            tool_call("call_a", "lookup_order", '{"order": 7}'),
            tool_call("call_b", "issue_refund", ""),
            tool_call("call_c", "lookup_order", '{"order": 7'),
        ],
    )
    router.post(URL).mock(return_value=httpx.Response(200, json=completion(message, "tool_calls")))

    response = run(adapter(router), turn(tools=(LOOKUP, REFUND)))

    assert response.text is None
    assert response.stop_reason == "tool_calls"
    assert response.tool_calls == (
        {"id": "call_a", "name": "lookup_order", "arguments": {"order": 7}},
        {"id": "call_b", "name": "issue_refund", "arguments": {}},
        # not JSON: kept whole so the loop can re-prompt and the text can be sent back
        {"id": "call_c", "name": "lookup_order", "arguments": {"_raw": '{"order": 7'}},
    )


def test_the_request_carries_tools_schemas_and_the_converted_transcript(router, turn):
    message = ChatCompletionMessage(role="assistant", content="ok")
    route = router.post(URL).mock(return_value=httpx.Response(200, json=completion(message)))
    request = turn(
        TRANSCRIPT,
        tools=(LOOKUP, REFUND),
        max_tokens=256,
        temperature=0.2,
        instructions="Verify the customer first.",
    )

    run(adapter(router), request)

    body = sent(route)
    assert body["model"] == "gpt-4o-mini"
    assert body["max_completion_tokens"] == 256 and "max_tokens" not in body
    assert body["temperature"] == 0.2
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Find an order by its number.",
                # strict: every property required, nothing else allowed
                "parameters": {**LOOKUP.input_schema, "additionalProperties": False},
                "strict": True,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "issue_refund",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Verify the customer first."},
        {"role": "user", "content": '{"context":{"a":2,"b":1},"instruction":"Refund order 7."}'},
        {
            "role": "assistant",
            "content": "Looking it up.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order":7}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"total":30}'},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "issue_refund", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: refunds are closed"},
    ]
    assert "response_format" not in body


def test_a_response_schema_asks_for_json_schema_output(router, turn):
    schema = {
        "type": "object",
        "required": ["decision"],
        "properties": {"decision": {"enum": ["refund"]}},
    }
    message = ChatCompletionMessage(role="assistant", content='{"decision":"refund"}')
    route = router.post(URL).mock(return_value=httpx.Response(200, json=completion(message)))

    response = run(adapter(router), turn(response_schema=schema))

    assert sent(route)["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": schema},
    }
    assert response.text == '{"decision":"refund"}'


def test_raw_arguments_go_back_to_the_provider_verbatim(router, turn):
    message = ChatCompletionMessage(role="assistant", content="ok")
    route = router.post(URL).mock(return_value=httpx.Response(200, json=completion(message)))
    entries = [
        TRANSCRIPT[0],
        {
            "role": "assistant",
            "text": None,
            "tool_calls": [{"id": "c", "name": "x", "arguments": {"_raw": "{oops"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c",
            "content": "arguments are not JSON",
            "is_error": True,
        },
    ]

    run(adapter(router), turn(entries))

    assert sent(route)["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{oops"


def test_an_openai_compatible_server_gets_max_tokens_at_its_base_url(router, turn):
    message = ChatCompletionMessage(role="assistant", content="hi")
    route = router.post("http://localhost:11434/v1/chat/completions").mock(
        return_value=httpx.Response(200, json=completion(message))
    )

    run(adapter(router, compatible=True), turn(max_tokens=64))

    body = sent(route)
    assert (body["model"], body["max_tokens"]) == ("llama3.1:8b", 64)
    assert "max_completion_tokens" not in body


def test_a_timeout_the_sdk_gave_up_on_is_a_ProviderError_naming_the_endpoint(router, turn):
    router.post(URL).mock(side_effect=httpx.ReadTimeout("read timed out"))

    failed = failure(adapter(router), turn())

    assert failed.cause == "ProviderError"  # the SDK's retries are spent: not sent again
    assert failed.detail.startswith("provider openai at https://api.openai.com/v1, model ")
    assert "APITimeoutError" in failed.detail


def test_a_context_length_error_is_ContextTooLong(router, turn):
    error = {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 130512 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    router.post(URL).mock(return_value=httpx.Response(400, json={"error": error}))

    failed = failure(adapter(router), turn())

    assert failed.cause == "ContextTooLong"
    assert "maximum context length" in failed.detail


def test_a_vllm_context_message_without_a_code_is_ContextTooLong(router, turn):
    error = {
        "object": "error",
        "message": "This model's maximum context length is 8192 tokens.",
        "type": "BadRequestError",
        "code": 400,
    }
    router.post(URL).mock(return_value=httpx.Response(400, json=error))

    assert failure(adapter(router), turn()).cause == "ContextTooLong"


def test_other_bad_requests_and_server_errors_are_ProviderErrors(router, turn):
    router.post(URL).mock(
        side_effect=[
            httpx.Response(
                400, json={"error": {"message": "bad tool schema", "type": "invalid_request_error"}}
            ),
            httpx.Response(500, json={"error": {"message": "boom", "type": "server_error"}}),
        ]
    )
    model = adapter(router)

    first, second = failure(model, turn()), failure(model, turn())

    assert (first.cause, second.cause) == ("ProviderError", "ProviderError")
    assert "500" in second.detail


def test_provider_retries_happen_inside_the_adapter(router, turn):
    message = ChatCompletionMessage(role="assistant", content="second time lucky")
    route = router.post(URL).mock(
        side_effect=[
            httpx.Response(
                500, json={"error": {"message": "boom"}}, headers={"retry-after-ms": "1"}
            ),
            httpx.Response(200, json=completion(message)),
        ]
    )

    response = run(adapter(router, retries=1), turn())

    assert response.text == "second time lucky"
    assert route.call_count == 2


def test_a_missing_api_key_is_an_Unknown_failure_not_a_crash(monkeypatch, turn):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)

    failed = failure(OpenAIModel("gpt-4o-mini"), turn())

    assert failed.cause == "Unknown"
    assert "OpenAIError" in failed.detail


def test_an_openai_compatible_server_needs_no_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIModel("llama3.1:8b", base_url="http://localhost:11434/v1", compatible=True)

    client = model._sdk()

    assert client.api_key == "unused"
    assert str(client.base_url).startswith("http://localhost:11434/v1")


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
    [(401, "invalid_api_key"), (403, "permission_denied"), (404, "model_not_found")],
)
def test_a_rejected_key_or_model_fails_the_node_at_once(router, turn, status, kind):
    error = {"error": {"message": "no", "type": "invalid_request_error", "code": kind}}
    route = router.post(URL).mock(return_value=httpx.Response(status, json=error))

    failed = failure(adapter(router), turn())

    assert failed.cause == "ProviderError"  # the loop does not send it again
    assert str(status) in failed.detail
    assert route.call_count == 1  # and the SDK did not retry it either


def test_the_files_llm_timeout_and_retries_reach_the_sdk(tmp_path):
    from plait.models.registry import model_from_spec
    from plait.workflow import load_workflow

    (tmp_path / "wf.yaml").write_text(
        "name: w\nnodes: [{id: a, instruction: Go.}]\n"
        "llm: {model: 'openai-compatible:http://127.0.0.1:9/v1:m', timeout_s: 7.5,"
        " max_retries: 0}\n"
    )
    wf = load_workflow(tmp_path / "wf.yaml")

    model = model_from_spec(str(wf.llm["model"]), base_dir=tmp_path, settings=wf.llm)

    assert isinstance(model, OpenAIModel)
    sdk = model._sdk()
    assert (sdk.timeout, sdk.max_retries) == (7.5, 0)


def test_an_unknown_host_names_the_endpoint_and_what_the_resolver_said(router, turn):
    router.post(URL).mock(side_effect=httpx.ConnectError("[Errno -2] Name or service not known"))

    failed = failure(adapter(router), turn())

    assert failed.cause == "ProviderError"
    assert failed.detail == (
        "provider openai at https://api.openai.com/v1, model 'gpt-4o-mini': APIConnectionError:"
        " Connection error. (ConnectError: [Errno -2] Name or service not known)"
    )
