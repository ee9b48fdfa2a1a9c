"""The decision backends and the spec that names one (``llm.decide.backend``).

A backend answers one question shape: given a query and item texts, a probability per
item that the item is relevant to the query. The typed questions (``score``, ``choose``
k of n, ``yesno``) are all answered from those probabilities (``driver/decide_exec.py``).
Building a backend is where a missing install is found: PLAIT-E037, with the
``pip install`` line, at ``plait check``, start and resume alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from plait.core.errors import PlaitError

LOCAL = "local"
SCRIPTED_PREFIX = "scripted:"


class Backend(Protocol):
    """Scores items against a query; ``provider`` and ``model`` name it in provenance."""

    provider: str
    model: str

    async def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


@dataclass
class ScriptedBackend:
    """Fixed answers from a JSON file, for tests: ``{"scores": {item id or text: p},
    "default": p}``; ``{"fail": "why"}`` makes every question fail."""

    path: Path
    scores: Mapping[str, float] = field(default_factory=dict)
    default: float = 0.0
    fail: str | None = None
    provider: str = "scripted"
    model: str = ""

    @staticmethod
    def load(spec: str, base_dir: Path) -> ScriptedBackend:
        path = base_dir / spec[len(SCRIPTED_PREFIX) :]
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PlaitError(
                "E037", f"decision backend '{spec}': cannot read {path}: {exc}"
            ) from None
        if not isinstance(data, dict):
            raise PlaitError("E037", f"decision backend '{spec}': {path} is not a JSON object")
        return ScriptedBackend(
            path=path,
            scores={str(k): float(v) for k, v in (data.get("scores") or {}).items()},
            default=float(data.get("default", 0.0)),
            fail=data.get("fail"),
            model=path.name,
        )

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if self.fail:
            raise RuntimeError(self.fail)
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> float:
        if text in self.scores:
            return self.scores[text]
        head = text.split(":", 1)[0]  # a tool's text starts with its name
        return self.scores.get(head, self.default)


def backend_from_spec(spec: str, base_dir: Path, settings: Mapping[str, Any]) -> Backend:
    """The backend a pinned spec names (PLAIT-E037 when it cannot run here)."""
    if spec == LOCAL:
        from plait.decide.local import LocalBackend

        return LocalBackend.load()
    if spec.startswith(SCRIPTED_PREFIX):
        return ScriptedBackend.load(spec, base_dir)
    from plait.decide.llm_backend import LlmBackend

    return LlmBackend.load(spec, base_dir, settings)


def check_backend(spec: str, base_dir: Path) -> None:
    """PLAIT-E037 unless ``spec``'s backend can be built here, without loading a model:
    the local backend's packages importable, a scripted file readable, a model spec's
    provider known and its SDK installed."""
    if spec == LOCAL:
        from plait.decide.local import check_installed

        check_installed()
    elif spec.startswith(SCRIPTED_PREFIX):
        ScriptedBackend.load(spec, base_dir)
    else:
        from plait.decide.llm_backend import check_spec

        check_spec(spec, base_dir)


def tool_text(name: str, description: str | None, schema: Mapping[str, Any] | None) -> str:
    """What a tool is scored on: ``name: description`` (the name read as words; the
    scripted backend reads the name back from before the first ``:``). The schema's
    argument names are left out: measured on bench/decide_data, they cost recall."""
    del schema
    return f"{name}: {description or name.replace('_', ' ')}"
