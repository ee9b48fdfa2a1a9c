"""Scripted models answer exactly as CONTRACT.md "Scripted models" says."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from plait.core.canonical import dumps
from plait.core.errors import PlaitError
from plait.models import ModelError, ModelResponse, ScriptedModel, model_from_spec

from .conftest import CALL_ID


def scripted(tmp_path: Path, content: object, name: str = "answers.json") -> ScriptedModel:
    (tmp_path / name).write_text(content if isinstance(content, str) else json.dumps(content))
    model = model_from_spec(f"scripted:{name}", base_dir=tmp_path)
    assert isinstance(model, ScriptedModel)
    return model


def answer(model: ScriptedModel, request) -> ModelResponse:
    return asyncio.run(model.complete(request))


def failure(model: ScriptedModel, request) -> ModelError:
    with pytest.raises(ModelError) as caught:
        asyncio.run(model.complete(request))
    return caught.value


def test_list_form_gives_the_nth_effect_of_the_run_the_nth_response(tmp_path, turn):
    model = scripted(tmp_path, [{"text": "first"}, {"text": "second"}, {"text": "third"}])

    texts = [answer(model, turn(ordinal_in_run=n, node=f"n{n}")).text for n in (2, 0, 1)]

    assert texts == ["third", "first", "second"]


def test_object_form_counts_effects_per_node(tmp_path, turn):
    model = scripted(tmp_path, {"a": [{"text": "a0"}, {"text": "a1"}], "b": [{"text": "b0"}]})

    a1 = answer(model, turn(node="a", ordinal_in_node=1, ordinal_in_run=7))
    b0 = answer(model, turn(node="b", ordinal_in_node=0, ordinal_in_run=8))

    assert (a1.text, b0.text) == ("a1", "b0")


def test_a_redelivered_turn_gets_the_same_response(tmp_path, turn):
    model = scripted(tmp_path, [{"text": "x", "tool_calls": [{"name": "t", "arguments": {}}]}])
    request = turn()

    assert answer(model, request) == answer(model, request)


def test_tool_call_ids_derive_from_the_call_id(tmp_path, turn):
    calls = [{"name": "lookup", "arguments": {"order": 7}}, {"name": "refund"}]
    model = scripted(tmp_path, [{"tool_calls": calls}])

    response = answer(model, turn())

    assert response.tool_calls == (
        {"id": f"call_{CALL_ID[:12]}_0", "name": "lookup", "arguments": {"order": 7}},
        {"id": f"call_{CALL_ID[:12]}_1", "name": "refund", "arguments": {}},
    )
    assert response.text is None


def test_usage_is_read_and_missing_usage_is_zero_tokens(tmp_path, turn):
    usage = {"input_tokens": 12, "output_tokens": 5}
    model = scripted(tmp_path, [{"text": "a", "usage": usage}, {"text": "b"}, {"usage": {}}])

    counts = [answer(model, turn(ordinal_in_run=n)).usage for n in range(3)]

    assert counts == [
        usage,
        {"input_tokens": 0, "output_tokens": 0},
        {"input_tokens": 0, "output_tokens": 0},
    ]


def test_the_journaled_result_is_canonical_json_and_round_trips(tmp_path, turn):
    model = scripted(
        tmp_path, [{"text": "t", "tool_calls": [{"name": "x", "arguments": {"k": [1]}}]}]
    )
    response = answer(model, turn())

    journaled = response.to_json()

    assert dumps(journaled)
    assert journaled["model"] == "scripted:answers.json"
    assert ModelResponse.from_json(journaled) == response


def test_arguments_handed_out_are_fresh_copies(tmp_path, turn):
    model = scripted(tmp_path, [{"tool_calls": [{"name": "x", "arguments": {"k": [1]}}]}])

    answer(model, turn()).tool_calls[0]["arguments"]["k"].append(2)

    assert answer(model, turn()).tool_calls[0]["arguments"] == {"k": [1]}


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        ("timeout", "Timeout"),
        ("context_too_long", "ContextTooLong"),
        ("executor_error", "ExecutorError"),
    ],
)
def test_scripted_errors_fail_the_turn_with_their_cause(tmp_path, turn, error, cause):
    model = scripted(tmp_path, [{"text": "ignored", "error": error}])

    assert failure(model, turn()).cause == cause


def test_running_out_of_responses_is_an_executor_error_naming_the_file(tmp_path, turn):
    model = scripted(tmp_path, [{"text": "only"}])

    error = failure(model, turn(ordinal_in_run=1))

    assert error.cause == "ExecutorError"
    assert error.detail == (
        "scripted model answers.json: no response left for LLM effect #2 (the file has 1)"
    )


def test_running_out_in_the_object_form_names_the_node(tmp_path, turn):
    model = scripted(tmp_path, {"a": [{"text": "a0"}]})

    error = failure(model, turn(node="b", ordinal_in_node=0))

    assert error.cause == "ExecutorError"
    assert "answers.json" in error.detail and "of node 'b'" in error.detail
    assert "(the file has 0)" in error.detail


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[{'text': 1}", "not valid JSON"),
        ('"hello"', "expected a list of responses or an object mapping node ids to lists"),
        ([{"text": "ok"}, {"txt": "typo"}], "response #2: unknown key 'txt'"),
        ([{"text": 3}], "response #1: text must be a string"),
        ([{"error": "boom"}], "response #1: error must be one of timeout"),
        ([{"usage": {"input_tokens": -1}}], "response #1: usage.input_tokens must be"),
        ([{"usage": {"prompt_tokens": 1}}], "response #1: usage: unknown key 'prompt_tokens'"),
        ([{"tool_calls": [{"arguments": {}}]}], "response #1: tool_calls[0]: name must be"),
        ([{"tool_calls": [{"name": "x", "arguments": [1]}]}], "tool_calls[0]: arguments must be"),
        ([{"tool_calls": [{"name": "x", "id": "mine"}]}], "tool_calls[0]: unknown key 'id'"),
        ([7], "response #1: expected an object"),
        ({"a": [{}, {}, {"nope": 1}]}, "node 'a': response #3: unknown key 'nope'"),
        ({"a": {"text": "x"}}, "node 'a': expected a list of responses"),
        ('[{"text": "a", "text": "b"}]', "duplicate key 'text'"),
    ],
)
def test_a_malformed_file_is_E019_naming_the_file_and_the_response(tmp_path, content, expected):
    with pytest.raises(PlaitError) as caught:
        scripted(tmp_path, content)

    assert caught.value.code == "E019"
    assert str(caught.value).startswith("PLAIT-E019 scripted model file 'answers.json'")
    assert expected in str(caught.value)


def test_every_problem_of_a_malformed_file_is_reported(tmp_path):
    with pytest.raises(PlaitError) as caught:
        scripted(tmp_path, [{"txt": 1}, {"error": "nope"}])

    assert [p.code for p in caught.value.problems] == ["E019", "E019"]


def test_a_missing_file_is_E004(tmp_path):
    with pytest.raises(PlaitError) as caught:
        model_from_spec("scripted:absent.json", base_dir=tmp_path)

    assert caught.value.code == "E004"
    assert "absent.json" in str(caught.value)


def test_the_file_is_read_relative_to_base_dir(tmp_path, turn):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "r.json").write_text('[{"text": "here"}]')

    model = model_from_spec("scripted:r.json", base_dir=tmp_path / "sub")

    assert asyncio.run(model.complete(turn())).text == "here"
