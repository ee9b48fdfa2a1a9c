"""An MCP tool's image result reaches the model as an image (issue #18 part 3), not as
base64 text: a real stdio MCP server (tests/support/mcp_image_server.py, the ``mcp``
SDK) answers with a caption and a PNG; the next turn sent to a fake provider on loopback
carries the PNG as an OpenAI ``image_url`` part / an Anthropic ``image`` block, and the
run verifies."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.support import Cli
from support.fake_provider import Answer, Call, FakeProvider
from support.mcp_image_server import PICTURE

SERVER = [sys.executable, str(Path(__file__).parents[1] / "support" / "mcp_image_server.py")]


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.chdir(tmp_path)
    return Cli(tmp_path)


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    answers = [Answer(calls=(Call("picture", {}),)), Answer(("It is a red square.",))]
    fake = FakeProvider(answers=answers).start()
    yield fake
    fake.close()


def write_look(cli: Cli, llm: dict[str, object]) -> None:
    """``look.yaml``: one agent node offered the image server's ``picture`` tool."""
    flow = {
        "name": "look",
        "nodes": [{"id": "agent", "instruction": "Describe it.", "tools": ["picture"]}],
        "tools": {"picture": {"mcp": {"command": SERVER, "tool": "picture"}}},
        "llm": llm,
    }
    (cli.folder / "look.yaml").write_text(json.dumps(flow))


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_mcp_image_result_reaches_the_model_as_an_image(
    cli: Cli, provider: FakeProvider, api: str
):
    spec = provider.openai_spec if api == "openai" else "anthropic:fake"
    write_look(cli, {"model": spec, "max_retries": 0, "tool_result_chars": 500})  # not cut
    env = {} if api == "openai" else {"ANTHROPIC_BASE_URL": provider.url, "ANTHROPIC_API_KEY": "t"}

    done = cli.run("look.yaml", "r1", env=env)

    assert done.data["status"] == "completed", done
    second = provider.requests[1]
    sent = json.dumps(second)
    assert sent.count(PICTURE) == 1  # once, as an image: never as escaped text in a result
    if api == "openai":
        tool, shown = second["messages"][-2:]
        assert tool["role"] == "tool" and tool["content"].startswith("A red square.")
        assert shown["role"] == "user"
        url = f"data:image/png;base64,{PICTURE}"
        assert shown["content"][1:] == [{"type": "image_url", "image_url": {"url": url}}]
    else:
        (result,) = second["messages"][-1]["content"]
        assert result["type"] == "tool_result"
        assert result["content"] == [
            {"type": "text", "text": "A red square."},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PICTURE},
            },
        ]
    assert cli("verify", "r1").data["verified"] is True


def test_an_mcp_image_over_the_part_bound_fails_the_call_with_e032_and_the_run_goes_on(
    cli: Cli, provider: FakeProvider
):
    write_look(cli, {"model": provider.openai_spec, "max_retries": 0})

    done = cli.run("look.yaml", "r1", env={"PLAIT_MAX_PART_BYTES": "100"})

    assert done.data["status"] == "completed", done  # the model heard why and answered
    sent = json.dumps(provider.requests[1])
    assert PICTURE not in sent
    tool = provider.requests[1]["messages"][-1]
    assert tool["role"] == "tool" and "PLAIT-E032" in tool["content"]
    assert "content[1]" in tool["content"] and "PLAIT_MAX_PART_BYTES" in tool["content"]
    assert PICTURE not in json.dumps(cli("trace", "r1").data)  # nor in the journal
    assert cli("verify", "r1").data["verified"] is True
