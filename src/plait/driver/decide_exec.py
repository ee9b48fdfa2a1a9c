"""Executes ``decide`` effects: the journaled question answered by the pinned backend.

The question names tools by name (their text is rebuilt from the pinned definitions,
as ``llm_exec`` rebuilds a turn's tools) or carries its items' text (transcript pairs).
The answer is ``{"p": [one probability per item], "provider", "model", "latency_ms"}``
(``choose`` adds ``chosen``: the ``k`` most probable ids; ``yesno`` adds ``yes``). The
backend is built at the first question, so a run that never asks loads no model.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from plait.core.agents import agent_tool_specs
from plait.core.errors import PlaitError
from plait.core.events import Dispatch
from plait.core.outcomes import Completed, EffectOutcome, Failed

if TYPE_CHECKING:
    from plait.decide import Backend
    from plait.workflow.run_definition import RunDefinition


def answer_of(question: Mapping[str, Any], p: list[float]) -> dict[str, Any]:
    """The typed answer to ``question`` from its items' probabilities."""
    answer: dict[str, Any] = {"p": p}
    ids = [str(item.get("id")) for item in question.get("items", ())]
    if question.get("type") == "choose":
        k = int(question.get("k", 1))
        ranked = sorted(range(len(p)), key=lambda i: (-p[i], i))
        answer["chosen"] = [ids[i] for i in ranked[:k]]
    elif question.get("type") == "yesno":
        answer["yes"] = bool(p) and p[0] >= float(question.get("min_p", 0.5))
    return answer


class DecideRunner:
    """Answers each ``decide`` dispatch with the run's pinned backend."""

    def __init__(self, definition: RunDefinition) -> None:
        from plait.decide import tool_text

        self._settings = dict((definition.llm or {}).get("decide") or {})
        self._base_dir = definition.base_dir
        self._llm = dict(definition.llm or {})
        self._backend: Backend | None = None
        schemas = definition.tool_schemas
        self._texts = {
            name: tool_text(name, tool.description, schemas.get(name))
            for name, tool in sorted(definition.tools.items())
        }
        for name, (description, schema) in agent_tool_specs(definition.pinned).items():
            self._texts.setdefault(name, tool_text(name, description, schema))

    def _loaded(self) -> Backend:
        if self._backend is None:
            from plait.decide import backend_from_spec

            spec = str(self._settings.get("backend", "local"))
            self._backend = backend_from_spec(spec, self._base_dir, self._llm)
        return self._backend

    async def __call__(self, dispatch: Dispatch) -> EffectOutcome:
        question: Mapping[str, Any] = dispatch.input
        items = list(question.get("items", ()))
        texts = [
            self._texts.get(str(item["tool"]), str(item["tool"]))
            if "tool" in item
            else str(item.get("text", ""))
            for item in items
        ]
        try:
            backend = self._loaded()
            started = time.perf_counter()
            p = await backend.score(str(question.get("query", "")), texts)
            latency_ms = round((time.perf_counter() - started) * 1000)
        except PlaitError as exc:
            return Failed("ExecutorError", str(exc))
        except Exception as exc:  # a backend bug must not take the run down
            return Failed("ExecutorError", f"{type(exc).__name__}: {exc}")
        result = answer_of(question, [round(float(x), 4) for x in p])
        result.update(provider=backend.provider, model=backend.model, latency_ms=latency_ms)
        return Completed(result)
