"""``strict: true`` tools (issue #18 part 3): the schema sent is the one OpenAI's strict
mode accepts — equal to what the SDK's own ``openai.pydantic_function_tool`` makes of a
pydantic model — and an optional property without a default is nullable, its ``null``
dropped from the answer so the loop and the tool see a call that left it out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from enum import Enum

import openai
import pytest
from pydantic import BaseModel, Field

from plait.models import ModelRequest
from plait.models.base import ToolSpec
from plait.models.openai import OpenAIModel
from plait.models.strict_schema import strict_schema, without_added_nulls
from support.fake_provider import Answer, Call, FakeProvider


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    city: str | None = None


class Optional_(BaseModel):
    name: str
    nickname: str | None = None
    age: int = 30


class Nested(BaseModel):
    home: Address
    work: Address | None = None


class Lists(BaseModel):
    tags: list[str]
    stops: list[Address] = Field(description="Where to stop.")


class Enums(BaseModel):
    colour: Colour
    shade: Colour | None = None


@pytest.mark.parametrize("model", [Optional_, Nested, Lists, Enums])
def test_a_pydantic_models_schema_is_made_strict_as_the_sdk_makes_it(model: type[BaseModel]):
    sdk = openai.pydantic_function_tool(model)["function"]

    assert sdk["strict"] is True
    assert strict_schema(model.model_json_schema()) == sdk["parameters"]


OPTIONAL_LIMIT = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["q"],
}


def test_an_optional_property_without_a_default_becomes_nullable_and_required():
    assert strict_schema(OPTIONAL_LIMIT) == {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["q", "limit"],
        "additionalProperties": False,
    }
    assert without_added_nulls({"q": "x", "limit": None}, OPTIONAL_LIMIT) == {"q": "x"}
    assert without_added_nulls({"q": "x", "limit": 3}, OPTIONAL_LIMIT) == {"q": "x", "limit": 3}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(answers=[Answer(calls=(Call("search", {"q": "x", "limit": None}),))])
    yield fake.start()
    fake.close()


def test_a_strict_tool_is_sent_strict_and_its_added_null_is_not_journaled(provider: FakeProvider):
    tools = (
        ToolSpec("search", "Search.", OPTIONAL_LIMIT, strict=True),
        ToolSpec("plain", "Not strict.", OPTIONAL_LIMIT),
    )
    request = ModelRequest(
        messages=({"role": "user", "content": "Find x."},),
        tools=tools,
        call_id="c" * 64,
        node="agent",
        ordinal_in_run=0,
        ordinal_in_node=0,
    )
    model = OpenAIModel("fake", base_url=f"{provider.url}/v1", compatible=True)

    response = asyncio.run(model.complete(request))

    sent = {t["function"]["name"]: t["function"] for t in provider.requests[0]["tools"]}
    assert sent["search"]["strict"] is True
    assert sent["search"]["parameters"] == strict_schema(OPTIONAL_LIMIT)
    assert "strict" not in sent["plain"] and sent["plain"]["parameters"] == OPTIONAL_LIMIT
    assert response.tool_calls[0]["arguments"] == {"q": "x"}
