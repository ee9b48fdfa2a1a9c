"""A provider model (`openai-compatible:<base_url>:<model>`) against a local HTTP server that
answers in the chat-completions wire format (CONTRACT.md "llm", docs/llm-nodes.md "Models"):
what the provider sends back that is not what it should be — arguments that are not a JSON
object, a body that is not JSON, tool calls without ids — never runs a tool on made-up
arguments, never fails the node as `Unknown`, and keeps the transcript answerable.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from contract.support import Cli


class FakeProvider:
    """Answers the n-th POST with the n-th canned reply (the last one over and over)
    and keeps every request body."""

    def __init__(self) -> None:
        self.replies: list[tuple[str, bytes]] = []
        self.requests: list[dict[str, Any]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                provider.requests.append(json.loads(body))
                ctype, payload = provider.replies[
                    min(len(provider.requests), len(provider.replies)) - 1
                ]
                self.send_response(200)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.spec = f"openai-compatible:http://127.0.0.1:{self.server.server_port}/v1:fake"

    def answer(self, *replies: dict[str, Any] | tuple[str, str]) -> None:
        """Chat completions (dicts) or raw ``(content type, body)`` replies."""
        for reply in replies:
            if isinstance(reply, tuple):
                self.replies.append((reply[0], reply[1].encode()))
            else:
                self.replies.append(("application/json", json.dumps(reply).encode()))


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def completion(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"type": "function", **call} for call in calls]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def workflow(cli: Cli, provider: FakeProvider) -> str:
    flow = "name: provider\nnodes: [{id: agent, instruction: Go.}]\n"
    flow += 'tools: {finish: {python: "contract_tools:finish"}}\n'
    flow += f'llm: {{model: "{provider.spec}", max_effects_per_attempt: 8}}\n'
    (cli.folder / "provider.yaml").write_text(flow)
    return "provider.yaml"


@pytest.mark.parametrize("arguments", ['{"a": 1', "[1, 2]", "null"])
def test_tool_call_arguments_that_are_not_a_json_object_run_nothing_and_reprompt(
    cli: Cli, provider: FakeProvider, arguments: str
):
    call = {"id": "call_1", "function": {"name": "finish", "arguments": arguments}}
    provider.answer(completion(calls=[call]), completion("done"))

    done = cli.run(workflow(cli, provider), "r1", env={"OPENAI_API_KEY": "sk-test"})

    assert done.exit_code == 0, done
    assert [e["kind"] for e in cli("trace", "r1").data["entries"]] == ["llm", "llm"]
    told = provider.requests[1]["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "call_1"
    assert told["content"].startswith(
        "Error: invalid arguments for 'finish': (root): the arguments are not a JSON object"
    )
    assert cli("verify", "r1").data["verified"] is True


@pytest.mark.parametrize(
    "body", [("application/json", "{not json"), ("text/html", "<html>bad gateway</html>")]
)
def test_a_provider_answer_that_is_not_json_is_an_ExecutorError_sent_again(
    cli: Cli, provider: FakeProvider, body: tuple[str, str]
):
    provider.answer(body, completion("done"))

    done = cli.run(workflow(cli, provider), "r1", env={"OPENAI_API_KEY": "sk-test"})

    assert done.exit_code == 0, done
    assert done.data["context"] == {"agent": "done"}
    first, second = cli("trace", "r1").data["entries"]
    assert first["failure"]["cause"] == "ExecutorError"
    assert first["failure"]["detail"].startswith("the provider's answer is not JSON")
    assert second["status"] == "completed"


def test_tool_calls_without_an_id_or_with_a_repeated_one_get_ids_of_their_own(
    cli: Cli, provider: FakeProvider
):
    calls = [
        {"function": {"name": "finish", "arguments": "{}"}},
        {"id": "call_1", "function": {"name": "finish", "arguments": "{}"}},
        {"id": "call_1", "function": {"name": "finish", "arguments": "{}"}},
    ]
    provider.answer(completion(calls=calls), completion("done"))

    done = cli.run(workflow(cli, provider), "r1", env={"OPENAI_API_KEY": "sk-test"})

    assert done.exit_code == 0, done
    ids = [c["id"] for c in cli("trace", "r1").data["entries"][0]["result"]["tool_calls"]]
    assert ids[1] == "call_1" and all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 3
    sent_back = [m["tool_call_id"] for m in provider.requests[1]["messages"] if m["role"] == "tool"]
    assert sent_back == ids
