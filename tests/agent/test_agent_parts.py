"""``Agent.run`` with images and files (issue #18 part 3): typed pieces, as pydantic-ai's
``BinaryContent`` / ``ImageUrl``, reach the provider as one user message of its image and
file parts; a piece no provider would take is refused before the run is written."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from plait import Agent, BinaryContent, ImageUrl, PlaitError
from support.fake_provider import Answer, FakeProvider

PNG = bytes(range(256)) * 8


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(answers=[Answer(("A cat.",))]).start()
    yield fake
    fake.close()


def test_typed_pieces_are_one_user_message_of_image_parts(provider: FakeProvider, db: str):
    agent = Agent(provider.openai_spec, instructions="Describe images.", db=db)
    pieces = ["What is this?", BinaryContent(PNG, "image/png"), ImageUrl("https://x.test/a.png")]

    result = agent.run_sync(pieces)

    assert result.output == "A cat."
    (body,) = provider.requests
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert body["messages"] == [
        {"role": "system", "content": "Describe images."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": data_url}},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
            ],
        },
    ]
    assert agent.verify(result.run_id).verified


def test_a_piece_too_large_is_refused_and_nothing_is_written(
    provider: FakeProvider, db: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PLAIT_MAX_PART_BYTES", "100")
    agent = Agent(provider.openai_spec, instructions="Describe images.", db=db)

    with pytest.raises(PlaitError) as refused:
        agent.run_sync(["What is this?", BinaryContent(PNG, "image/png")], run_id="big")

    assert refused.value.code == "E032"
    assert "$parts[1]: 2048 bytes, more than the 100" in str(refused.value)
    assert provider.requests == []
    with pytest.raises(PlaitError, match="E017"):
        agent.state("big")
