"""The LLM decision backend: the pinned provider (the official SDK against the loopback
fake provider) asked which numbered items are relevant, with a response schema."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plait.core.errors import PlaitError
from plait.decide import backend_from_spec, check_backend
from support.fake_provider import Answer, FakeProvider


def test_the_model_chooses_items_and_they_get_probability_one(tmp_path: Path):
    fake = FakeProvider(answers=[Answer(('{"relevant": [1, 2]}',))]).start()
    try:
        backend = backend_from_spec(fake.openai_spec, tmp_path, {})
        p = asyncio.run(backend.score("refund order A-1", ["restart: x", "refund: y", "z: w"]))
    finally:
        fake.close()
    assert p == [0.0, 1.0, 1.0]
    assert (backend.provider, backend.model) == ("openai-compatible", fake.openai_spec[18:])
    (request,) = fake.requests
    sent = str(request["messages"])
    assert "refund order A-1" in sent and "1. refund: y" in sent
    schema = request["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["relevant"]


def test_an_unanswerable_reply_chooses_nothing(tmp_path: Path):
    fake = FakeProvider(answers=[Answer(("I think the second one",))]).start()
    try:
        backend = backend_from_spec(fake.openai_spec, tmp_path, {})
        assert asyncio.run(backend.score("q", ["a", "b"])) == [0.0, 0.0]
    finally:
        fake.close()


def test_an_unknown_provider_is_e037(tmp_path: Path):
    with pytest.raises(PlaitError) as refused:
        check_backend("nosuch:model", tmp_path)
    assert refused.value.code == "E037"
    assert "nosuch:model" in str(refused.value)
