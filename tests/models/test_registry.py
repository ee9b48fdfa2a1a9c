"""The model registry: one Provider per spec prefix drives building, credentials and messages."""

from __future__ import annotations

from dataclasses import replace

import pytest

from plait.core.errors import PlaitError
from plait.models import PROVIDERS, Provider, ScriptedModel, check_credentials, model_from_spec
from plait.models.registry import SpecParts


def test_the_registry_knows_the_four_providers_in_message_order():
    assert list(PROVIDERS) == ["openai", "anthropic", "openai-compatible", "scripted"]
    assert all(key == p.prefix for key, p in PROVIDERS.items())


def test_the_unknown_provider_message_lists_every_registered_usage(tmp_path):
    with pytest.raises(PlaitError) as caught:
        model_from_spec("gemini:pro", base_dir=tmp_path)

    assert caught.value.code == "E006"
    assert str(caught.value).endswith(
        "model 'gemini:pro': unknown provider 'gemini' "
        "(known: openai:, anthropic:, openai-compatible:<base_url>:, scripted:)"
    )


def test_key_variables_come_from_the_provider_record():
    assert PROVIDERS["openai"].key_env == ("OPENAI_API_KEY",)
    assert PROVIDERS["anthropic"].key_env == ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    assert PROVIDERS["openai-compatible"].key_env == ()
    assert PROVIDERS["scripted"].key_env == ()


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-0", "ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"),
    ],
)
def test_a_provider_without_its_key_is_E006_naming_the_variables(monkeypatch, spec, names):
    for provider in PROVIDERS.values():
        for name in provider.key_env:
            monkeypatch.setenv(name, "")  # empty counts as unset

    with pytest.raises(PlaitError) as caught:
        check_credentials(spec)

    assert caught.value.code == "E006"
    assert f"needs an API key: set {names} in the environment" in str(caught.value)


def test_any_one_key_variable_is_enough(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "t")

    check_credentials("anthropic:claude-sonnet-4-0")


@pytest.mark.parametrize("spec", ["openai-compatible:http://h:1/v1:m", "scripted:x.json", "x:y"])
def test_providers_without_keys_and_unknown_prefixes_pass_the_credential_check(spec):
    check_credentials(spec)


def test_a_provider_without_an_sdk_reads_no_settings(tmp_path):
    (tmp_path / "r.json").write_text('[{"text": "hi"}]')

    model = model_from_spec("scripted:r.json", base_dir=tmp_path, settings={"max_retries": -1})

    assert isinstance(model, ScriptedModel)


def test_adding_a_provider_is_one_entry(monkeypatch, tmp_path):
    seen: list[SpecParts] = []

    def build(parts: SpecParts) -> ScriptedModel:
        seen.append(parts)
        return ScriptedModel(parts.spec, by_run=())

    echo = Provider("echo", "echo:", build, ("ECHO_KEY",), sdk_extra="echo")
    monkeypatch.setitem(PROVIDERS, "echo", echo)
    monkeypatch.delenv("ECHO_KEY", raising=False)

    model = model_from_spec("echo:m:1", base_dir=tmp_path, settings={"max_retries": 4})

    assert isinstance(model, ScriptedModel)
    assert seen[0] == replace(seen[0], spec="echo:m:1", rest="m:1", base_dir=tmp_path)
    assert seen[0].settings is not None and seen[0].settings.max_retries == 4
    with pytest.raises(PlaitError, match="set ECHO_KEY"):
        check_credentials("echo:m")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("openai-compatible:http://localhost:11434/v1", "the model name is missing after"),
        ("openai-compatible:http://localhost:8080", "the model name is missing after"),
        ("openai:", "the model name is missing"),
        ("openai-compatible:localhost:11434", "expected openai-compatible:<base_url>:<model>"),
    ],
)
def test_a_spec_missing_its_model_is_refused_not_misparsed(tmp_path, spec, problem):
    from plait.models.registry import spec_problem

    assert (spec_problem(spec) or "").startswith(problem)
    with pytest.raises(PlaitError) as caught:
        model_from_spec(spec, base_dir=tmp_path)
    assert caught.value.code == "E006" and problem in str(caught.value)
