"""The agent's model: the real adapter wrapped with lifecycle hooks and turn events.

``HookedModel`` is what the driver calls for every ``llm`` effect of an agent
run. It shows the request to ``before_request`` (a deep copy: the hook may read
it, never change what the core holds), calls the real model, lets
``after_response`` keep or replace the answer, and reports the turn to the
stream. What it returns is what the driver journals, so a replaced response is
the journaled response and ``verify``, which answers every turn from the
journal, replays it exactly. A turn answered from the journal (resume after a
crash) calls neither the model nor the hooks.

The Agent hands the wrapper to its Runtime (``Runtime(model=...)``), which calls it
instead of the model the workflow's spec names.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from plait.models.base import Model, ModelError, ModelRequest, ModelResponse, OnDelta, answer

BeforeRequest = Callable[[ModelRequest], Awaitable[None] | None]
"""Called before each model turn with a copy of the request; may inspect, cannot change it."""

AfterResponse = Callable[
    [ModelRequest, ModelResponse], ModelResponse | Awaitable[ModelResponse | None] | None
]
"""Called after each model turn; returns a replacement response, or None to keep the answer."""

TurnListener = Callable[[str, ModelRequest, ModelResponse | None], None]
"""Told ``("started", request, None)`` and ``("finished", request, response)`` for each turn."""


class HookedModel:
    """A ``Model`` that runs the agent's hooks around the real model and reports each turn."""

    def __init__(
        self,
        model: Model,
        *,
        before_request: BeforeRequest | None = None,
        after_response: AfterResponse | None = None,
        on_turn: TurnListener | None = None,
        output_type: type[BaseModel] | None = None,
    ) -> None:
        self.model = model
        self._output_type = output_type
        self.spec = model.spec
        self._before = before_request
        self._after = after_response
        self._on_turn = on_turn
        self.turns = 0
        """How many turns this wrapper actually sent to the model (tests count them)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._turn(request, None)

    async def stream(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        """The turn streamed when the real model can (else answered whole); the deltas are
        the model's own, ``after_response`` still decides what is journaled."""
        return await self._turn(request, on_delta)

    async def _turn(self, request: ModelRequest, on_delta: OnDelta | None) -> ModelResponse:
        self.turns += 1
        if self._on_turn is not None:
            self._on_turn("started", request, None)
        if self._before is not None:
            await _maybe_await(self._before(copy.deepcopy(request)))
        response = await answer(self.model, request, on_delta)
        if self._after is not None:
            replaced = await _maybe_await(self._after(copy.deepcopy(request), response))
            if replaced is not None:
                if not isinstance(replaced, ModelResponse):
                    raise TypeError(
                        "after_response must return a ModelResponse or None, got "
                        f"{type(replaced).__name__}"
                    )
                response = replaced
        if self._on_turn is not None:
            self._on_turn("finished", request, response)
        self._check_output(request, response)
        return response

    def _check_output(self, request: ModelRequest, response: ModelResponse) -> None:
        """A final answer the agent's ``output_type`` refuses (its validators, beyond the
        JSON schema the core checks) fails the turn as SchemaValidationFailed: the loop
        re-prompts once, then the node fails, as for an answer off the schema. The failure
        is journaled, so replay sees it without running the validators again."""
        final = request.response_schema is not None and not response.tool_calls
        if self._output_type is None or not final or response.text is None:
            return
        try:
            self._output_type.model_validate_json(response.text)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ModelError(
                "SchemaValidationFailed",
                f"output did not match {self._output_type.__name__}: {problems}",
            ) from None


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
