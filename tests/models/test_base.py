"""Specs name adapters; responses journal as canonical JSON; failures carry known causes."""

from __future__ import annotations

import sys

import pytest

from plait.core.canonical import dumps, loads
from plait.core.errors import PlaitError
from plait.models import ModelError, ModelResponse, model_from_spec
from plait.models.anthropic import AnthropicModel
from plait.models.openai import OpenAIModel


def test_openai_and_anthropic_specs_name_their_model(tmp_path):
    openai_model = model_from_spec("openai:gpt-4o-mini", base_dir=tmp_path)
    anthropic_model = model_from_spec("anthropic:claude-sonnet-4-0", base_dir=tmp_path)

    assert isinstance(openai_model, OpenAIModel) and openai_model.model == "gpt-4o-mini"
    assert openai_model.spec == "openai:gpt-4o-mini" and not openai_model.compatible
    assert isinstance(anthropic_model, AnthropicModel)
    assert anthropic_model.model == "claude-sonnet-4-0"


@pytest.mark.parametrize(
    ("spec", "base_url", "model"),
    [
        (
            "openai-compatible:http://localhost:11434/v1:llama3.1",
            "http://localhost:11434/v1",
            "llama3.1",
        ),
        # Ollama tags hold ':' too: the URL ends at the first ':' after its host and port
        (
            "openai-compatible:http://localhost:11434/v1:llama3.1:8b",
            "http://localhost:11434/v1",
            "llama3.1:8b",
        ),
        (
            "openai-compatible:http://gpu:8000/v1:meta-llama/Llama-3.1-8B",
            "http://gpu:8000/v1",
            "meta-llama/Llama-3.1-8B",
        ),
        ("openai-compatible:https://vllm.internal:qwen2.5", "https://vllm.internal", "qwen2.5"),
        ("openai-compatible:http://[::1]:8080/v1:m", "http://[::1]:8080/v1", "m"),
    ],
)
def test_openai_compatible_specs_split_base_url_and_model(tmp_path, spec, base_url, model):
    adapter = model_from_spec(spec, base_dir=tmp_path)

    assert isinstance(adapter, OpenAIModel) and adapter.compatible
    assert (adapter.base_url, adapter.model, adapter.spec) == (base_url, model, spec)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gemini:pro", "unknown provider 'gemini'"),
        ("gpt-4o", "unknown provider 'gpt-4o'"),
        ("openai:", "the model name is missing"),
        ("openai-compatible:localhost:llama", "expected openai-compatible:<base_url>:<model>"),
        ("scripted:", "scripted:<file> needs a file"),
    ],
)
def test_unknown_or_malformed_specs_are_E006(tmp_path, spec, expected):
    with pytest.raises(PlaitError) as caught:
        model_from_spec(spec, base_dir=tmp_path)

    assert caught.value.code == "E006"
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "sdk", "extra"),
    [
        ("openai:gpt-4o", "openai", "openai"),
        ("openai-compatible:http://h:1/v1:m", "openai", "openai"),
        ("anthropic:claude-sonnet-4-0", "anthropic", "anthropic"),
    ],
)
def test_a_missing_sdk_is_E006_saying_which_extra_to_install(
    tmp_path, monkeypatch, spec, sdk, extra
):
    monkeypatch.setitem(sys.modules, sdk, None)  # makes `import <sdk>` raise ImportError
    monkeypatch.delitem(sys.modules, f"plait.models.{sdk}", raising=False)

    with pytest.raises(PlaitError) as caught:
        model_from_spec(spec, base_dir=tmp_path)

    assert caught.value.code == "E006"
    assert f"pip install 'plait[{extra}]'" in str(caught.value)


def test_settings_reach_the_adapter_and_unknown_keys_are_ignored(tmp_path):
    settings = {"max_retries": 5, "timeout_s": 30, "model": "openai:x", "max_tokens": 10}

    adapter = model_from_spec("openai:gpt-4o", base_dir=tmp_path, settings=settings)

    assert isinstance(adapter, OpenAIModel)
    assert (adapter.settings.max_retries, adapter.settings.timeout_s) == (5, 30.0)


def test_invalid_settings_are_E019(tmp_path):
    with pytest.raises(PlaitError) as caught:
        model_from_spec("openai:gpt-4o", base_dir=tmp_path, settings={"max_retries": -1})

    assert caught.value.code == "E019"


def test_a_response_journals_as_canonical_json_and_reads_back():
    response = ModelResponse(
        text=None,
        tool_calls=({"id": "c1", "name": "lookup", "arguments": {"order": 7}},),
        input_tokens=12,
        output_tokens=5,
        stop_reason="tool_calls",
        model="gpt-4o-mini-2024-07-18",
    )

    journaled = loads(dumps(response.to_json()))

    assert journaled == {
        "text": None,
        "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"order": 7}}],
        "usage": {"input_tokens": 12, "output_tokens": 5},
        "stop_reason": "tool_calls",
        "model": "gpt-4o-mini-2024-07-18",
    }
    assert ModelResponse.from_json(journaled) == response


def test_a_model_error_carries_a_known_cause():
    error = ModelError("Timeout", "slow")

    assert (error.cause, error.detail, str(error)) == ("Timeout", "slow", "Timeout: slow")
    with pytest.raises(ValueError):
        ModelError("UserAborted", "a person's doing, not an adapter's")
