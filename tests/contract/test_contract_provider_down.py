"""A provider that is down, refuses, or rate-limits (issue #17 part 5): the turn fails at once
or after the SDK's bounded retries — never re-sent up to the effect bound — with a failure
naming provider, base URL and model; ``llm.fallback`` asks the next model, the journal says
which one answered, and verify replays it without calling any model.

The fake providers are HTTP servers on loopback that count the requests they receive.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from contract.support import Cli

KEY = {"OPENAI_API_KEY": "sk-test"}


class Provider:
    """Answers every POST with one status (and headers); 200 is a chat completion;
    ``hang`` never answers (until the test ends)."""

    def __init__(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.status, self.headers = status, headers or {}
        self.requests = 0
        self.released = threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                provider.requests += 1
                if provider.status == 0:  # hang
                    provider.released.wait()
                    return
                body = json.dumps(
                    _completion("done") if provider.status == 200 else {"error": {"message": "no"}}
                ).encode()
                self.send_response(provider.status)
                for name, value in provider.headers.items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.spec = f"openai-compatible:{self.base_url}:fake"


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[Provider] = []

    def start(status: int = 200, headers: dict[str, str] | None = None) -> Provider:
        provider = Provider(status, headers)
        threading.Thread(target=provider.server.serve_forever, daemon=True).start()
        started.append(provider)
        return provider

    yield start
    for provider in started:
        provider.released.set()
        provider.server.shutdown()
        provider.server.server_close()


def closed_port_spec() -> tuple[str, str]:
    """A loopback port nothing listens on: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    return f"openai-compatible:{base_url}:fake", base_url


def workflow(cli: Cli, spec: str, **llm: Any) -> str:
    settings = {"model": spec, "max_effects_per_attempt": 8, "max_retries": 1, **llm}
    flow = "name: provider\nnodes: [{id: agent, instruction: Go.}]\n"
    flow += f"llm: {json.dumps(settings)}\n"
    (cli.folder / "provider.yaml").write_text(flow)
    return "provider.yaml"


def failed_turn(cli: Cli, run_id: str) -> dict[str, Any]:
    entries = cli("trace", run_id).data["entries"]
    assert [e["kind"] for e in entries] == ["llm"], entries  # one turn: never re-sent
    return dict(entries[0]["failure"])


def assert_names_the_endpoint(text: str, base_url: str) -> None:
    assert f"provider openai-compatible at {base_url}, model 'fake'" in text, text


def test_a_refused_connection_fails_the_turn_once_naming_the_provider(cli: Cli):
    spec, base_url = closed_port_spec()

    done = cli.run(workflow(cli, spec), "r1", env=KEY)

    assert done.data["status"] == "failed", done
    assert_names_the_endpoint(done.data["outcome"]["detail"], base_url)
    failure = failed_turn(cli, "r1")
    assert failure["cause"] == "ProviderError"
    assert "APIConnectionError: Connection error. (ConnectionRefusedError: " in failure["detail"]


@pytest.mark.parametrize("status", [400, 401, 404])
def test_a_4xx_is_one_request_and_fails_the_turn(cli: Cli, serve: Any, status: int):
    provider = serve(status)

    done = cli.run(workflow(cli, provider.spec), "r1", env=KEY)

    assert done.data["status"] == "failed", done
    assert provider.requests == 1
    assert_names_the_endpoint(done.data["outcome"]["detail"], provider.base_url)
    assert str(status) in failed_turn(cli, "r1")["detail"]


@pytest.mark.parametrize(
    ("status", "headers"), [(500, {}), (503, {}), (429, {"retry-after": "0.01"})]
)
def test_5xx_and_429_are_retried_max_retries_times_then_fail(
    cli: Cli, serve: Any, status: int, headers: dict[str, str]
):
    provider = serve(status, headers)

    done = cli.run(workflow(cli, provider.spec, max_retries=2), "r1", env=KEY)

    assert done.data["status"] == "failed", done
    assert provider.requests == 3  # 1 + llm.max_retries, for the whole node
    assert_names_the_endpoint(done.data["outcome"]["detail"], provider.base_url)
    assert failed_turn(cli, "r1")["cause"] == "ProviderError"


def test_a_hanging_provider_is_bounded_by_timeout_s(cli: Cli, serve: Any):
    provider = serve(0)

    done = cli.run(workflow(cli, provider.spec, timeout_s=0.2, max_retries=1), "r1", env=KEY)

    assert done.data["status"] == "failed", done
    assert provider.requests == 2
    assert_names_the_endpoint(done.data["outcome"]["detail"], provider.base_url)
    assert "APITimeoutError" in failed_turn(cli, "r1")["detail"]


def test_fallback_answers_when_the_first_model_is_down_and_verify_replays_it(cli: Cli, serve: Any):
    down, up = serve(503), serve(200)

    done = cli.run(workflow(cli, down.spec, fallback=[up.spec]), "r1", env=KEY)

    assert done.data["status"] == "completed", done
    assert done.data["context"] == {"agent": "done"}
    assert (down.requests, up.requests) == (2, 1)
    (turn,) = cli("trace", "r1").data["entries"]
    assert turn["result"]["spec"] == up.spec
    (fell,) = turn["result"]["fallbacks"]
    assert fell["spec"] == down.spec and fell["cause"] == "ProviderError"
    assert_names_the_endpoint(fell["detail"], down.base_url)

    down.status = up.status = 500  # verify must not ask either of them
    assert cli("verify", "r1").data["verified"] is True
    assert (down.requests, up.requests) == (2, 1)


def test_fallback_over_a_refused_connection_and_every_model_failing(cli: Cli, serve: Any):
    spec, base_url = closed_port_spec()
    also_down = serve(404)

    done = cli.run(workflow(cli, spec, fallback=[also_down.spec]), "r1", env=KEY)

    assert done.data["status"] == "failed", done
    detail = done.data["outcome"]["detail"]
    assert_names_the_endpoint(detail, base_url)
    assert_names_the_endpoint(detail, also_down.base_url)
    assert also_down.requests == 1


def test_the_spec_is_journaled_only_under_fallback(cli: Cli, serve: Any):
    up, spare = serve(200), serve(200)
    cli.run(workflow(cli, up.spec), "plain", env=KEY)
    cli.run(workflow(cli, up.spec, fallback=[spare.spec]), "guarded", env=KEY)

    (plain,) = cli("trace", "plain").data["entries"]
    (guarded,) = cli("trace", "guarded").data["entries"]

    assert "spec" not in plain["result"]  # a run without fallback keeps its journal bytes
    assert guarded["result"]["spec"] == up.spec and "fallbacks" not in guarded["result"]
    assert (up.requests, spare.requests) == (2, 0)


@pytest.mark.parametrize(
    ("llm", "field"),
    [
        ({"model": "openai-compatible:http://localhost:11434/v1"}, "llm.model"),
        (
            {"model": "openai:gpt-4o-mini", "fallback": ["openai-compatible:http://h:8080"]},
            "llm.fallback[0]",
        ),
    ],
)
def test_check_refuses_a_spec_missing_its_model_naming_the_field(
    cli: Cli, llm: dict[str, Any], field: str
):
    flow = f"name: w\nnodes: [{{id: a, instruction: Go.}}]\nllm: {json.dumps(llm)}\n"
    (cli.folder / "w.yaml").write_text(flow)

    done = cli.raw("check", cli.flow("w.yaml"), "--json")

    assert done.exit_code == 2 and done.code == "PLAIT-E006", done
    assert done.data["error"]["message"].startswith(f"{field}: model ")
    assert "the model name is missing" in done.data["error"]["message"]


def test_check_refuses_a_fallback_that_is_not_a_list_of_specs(cli: Cli):
    flow = "name: w\nnodes: [{id: a, instruction: Go.}]\n"
    flow += "llm: {model: 'openai:gpt-4o-mini', fallback: 'openai:gpt-4o'}\n"
    (cli.folder / "w.yaml").write_text(flow)

    done = cli.raw("check", cli.flow("w.yaml"), "--json")

    assert done.code == "PLAIT-E019", done
    assert done.data["error"]["message"] == (
        'llm: fallback must be a non-empty list of strings, got "openai:gpt-4o"'
    )


def test_a_fallback_without_its_api_key_is_refused_before_the_run(cli: Cli, serve: Any):
    up = serve(200)

    done = cli.run(
        workflow(cli, up.spec, fallback=["openai:gpt-4o-mini"]), "r1", env={"OPENAI_API_KEY": None}
    )

    assert done.exit_code == 2 and done.code == "PLAIT-E006", done
    assert "openai:gpt-4o-mini" in done.data["error"]["message"]
    assert up.requests == 0 and cli.run_ids() == []
