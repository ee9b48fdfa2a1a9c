"""The LLM decision backend: the pinned provider asked a constrained question.

The model gets the query and the numbered items and must answer JSON
``{"relevant": [numbers]}`` (a response schema where the provider supports one); a
chosen item's probability is 1, the others' 0. Such a backend is calibrated only by a
calibration file, like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plait.core.errors import PlaitError

ASK = (
    "You choose which numbered items are relevant to a task. Answer only JSON"
    ' {"relevant": [item numbers]}.'
)


def check_spec(spec: str, base_dir: Path) -> None:
    """PLAIT-E037 when the spec's provider is unknown or its SDK is not installed."""
    LlmBackend.load(spec, base_dir, {})


class LlmBackend:
    provider: str
    model: str

    def __init__(self, model: Any, spec: str) -> None:
        self._model = model
        self.provider, _, self.model = spec.partition(":")

    @staticmethod
    def load(spec: str, base_dir: Path, settings: Mapping[str, Any]) -> LlmBackend:
        from plait.models.registry import run_model

        try:
            model = run_model(spec, base_dir=base_dir, settings=dict(settings))
        except PlaitError as exc:
            raise PlaitError("E037", f"decision backend '{spec}': {exc.detail}") from None
        return LlmBackend(model, spec)

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        from plait.models.base import ModelRequest

        listing = "\n".join(f"{i}. {text}" for i, text in enumerate(texts))
        request = ModelRequest(
            messages=({"role": "user", "content": f"Task:\n{query}\n\nItems:\n{listing}"},),
            response_schema={
                "type": "object",
                "properties": {"relevant": {"type": "array", "items": {"type": "integer"}}},
                "required": ["relevant"],
                "additionalProperties": False,
            },
            max_tokens=256,
            temperature=0,
            instructions=ASK,
            call_id="decide",
            node="decide",
            ordinal_in_run=0,
            ordinal_in_node=0,
        )
        response = await self._model.complete(request)
        try:
            chosen = set(json.loads(response.text or "{}").get("relevant") or [])
        except (ValueError, AttributeError):
            chosen = set()
        return [1.0 if i in chosen else 0.0 for i in range(len(texts))]
