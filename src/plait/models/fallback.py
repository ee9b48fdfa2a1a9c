"""Fallback models (``llm.fallback``): when one model cannot answer a turn, the next one is asked.

A turn goes to the primary model; when it fails with a ``ProviderError`` (the provider is
down, refuses the request, or kept failing through its SDK's retries), the same request
goes to each fallback in order until one answers. The answer records the spec that gave
it and what the models before it said, so the journal — and through it verify, which
never calls a model — knows which model answered each turn. Failures that say something
about the request rather than the provider (a prompt too long, an answer that is not
JSON) are the loop's to handle and are not passed on to another model.
"""

from __future__ import annotations

import dataclasses

from plait.models.base import Model, ModelError, ModelRequest, ModelResponse, OnDelta, answer

PASSED_ON = frozenset({"ProviderError"})
"""The causes that send a turn on to the next model."""


class FallbackModel:
    """The primary model and its fallbacks, asked in order; ``spec`` is the primary's."""

    def __init__(self, models: tuple[Model, ...]) -> None:
        if len(models) < 2:
            raise ValueError("a fallback model needs a primary and at least one fallback")
        self.models = models
        self.spec = models[0].spec

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._ask(request, None)

    async def stream(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        """Streams from whichever model answers (one that failed may have sent some pieces:
        deltas are observational, the journal keeps the answer only)."""
        return await self._ask(request, on_delta)

    async def _ask(self, request: ModelRequest, on_delta: OnDelta | None) -> ModelResponse:
        failed: list[dict[str, str]] = []
        for model in self.models:
            try:
                response = await answer(model, request, on_delta)
            except ModelError as exc:
                if exc.cause not in PASSED_ON:
                    raise
                failed.append({"spec": model.spec, "cause": exc.cause, "detail": exc.detail})
                continue
            return dataclasses.replace(response, spec=model.spec, fallbacks=tuple(failed))
        tried = "; ".join(f"{f['spec']}: {f['detail']}" for f in failed)
        raise ModelError("ProviderError", f"every model failed this turn: {tried}")

    async def aclose(self) -> None:
        for model in self.models:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
