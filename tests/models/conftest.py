"""Shared pieces of the model adapter tests: turns, and respx routes the SDKs can reach.

The SDKs send through ``httpx2`` while respx matches ``httpx`` requests, so the
bridge below hands each request to a respx router and the router's answer back
to the SDK. Nothing here ever opens a socket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import httpx2
import pytest
import respx

from plait.models import ModelRequest

CALL_ID = "0123456789abcdef" * 4


def bridged_client(router: respx.MockRouter) -> httpx2.AsyncClient:
    """An httpx2 client whose every request is answered by ``router``."""

    async def handle(request: httpx2.Request) -> httpx2.Response:
        legacy = httpx.Request(
            request.method,
            str(request.url),
            headers=list(request.headers.multi_items()),
            content=request.content,
        )
        try:
            answer = await router.async_handler(legacy)
        except httpx.TimeoutException as exc:
            raise httpx2.ReadTimeout(str(exc), request=request) from exc
        except httpx.TransportError as exc:
            raise httpx2.ConnectError(str(exc), request=request) from exc
        return httpx2.Response(
            answer.status_code,
            headers=list(answer.headers.multi_items()),
            content=answer.content,
            request=request,
        )

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handle))


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(assert_all_mocked=True)


@pytest.fixture
def turn() -> Callable[..., ModelRequest]:
    """A turn with the identity fields filled in; keywords override any field."""

    def make(messages: Any = None, **fields: Any) -> ModelRequest:
        defaults: dict[str, Any] = {
            "call_id": CALL_ID,
            "node": "decide",
            "ordinal_in_run": 0,
            "ordinal_in_node": 0,
        }
        if messages is None:
            messages = [{"role": "user", "content": {"instruction": "Go.", "context": {}}}]
        return ModelRequest(messages=tuple(messages), **(defaults | fields))

    return make
