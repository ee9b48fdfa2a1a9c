"""Scripted models: answers read from a JSON file, for offline runs, tests and demos.

The file (CONTRACT.md, "Scripted models") is a list of responses, or an object
mapping node ids to lists. The n-th LLM effect of the run — of the node, for the
object form — gets the n-th response. The driver computes those ordinals from
the journal, so the answer depends on the request alone: a turn redelivered
after a crash gets the response it would have got the first time. Tool-call ids
derive from the turn's call id, never from randomness.

The file is read and checked once, when the model is made (a malformed file is
PLAIT-E019 naming the response); ``complete`` only indexes, so a thousand-turn
benchmark pays for parsing once. It never reads the transcript or the clock.

``stream`` answers the same response in deterministic pieces — the text word by word,
each call's arguments (canonical JSON) in ``ARGUMENT_CHUNK``-character pieces — so
tests and demos show streaming offline.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plait import files
from plait.core.canonical import CanonicalJSONError, dumps, loads
from plait.core.errors import PlaitError, Problem
from plait.models.base import Delta, ModelError, ModelRequest, ModelResponse, OnDelta

RESPONSE_KEYS = ("text", "tool_calls", "usage", "error")
TOOL_CALL_KEYS = ("name", "arguments")
USAGE_KEYS = ("input_tokens", "output_tokens")
ARGUMENT_CHUNK = 8
_WORDS = re.compile(r"\s*\S+\s*|\s+")
ERRORS = {
    "timeout": "Timeout",
    "context_too_long": "ContextTooLong",
    "executor_error": "ExecutorError",
}


@dataclass(frozen=True)
class ScriptedResponse:
    """One checked response of the file."""

    text: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None


class ScriptedModel:
    """Answers turns from a scripted file; holds the parsed file, nothing else."""

    def __init__(
        self,
        spec: str,
        *,
        by_run: tuple[ScriptedResponse, ...] | None = None,
        by_node: Mapping[str, tuple[ScriptedResponse, ...]] | None = None,
    ) -> None:
        if (by_run is None) == (by_node is None):
            raise ValueError("a scripted model has either a list or per-node lists")
        self.spec = spec
        self.file = spec.partition(":")[2]
        self._by_run = by_run
        self._by_node = dict(by_node) if by_node is not None else None

    @classmethod
    def load(cls, spec: str, path: Path) -> ScriptedModel:
        """Read and check ``path``; PLAIT-E004 when it is missing, PLAIT-E019 when malformed."""
        name = spec.partition(":")[2]
        try:
            text = files.read_text(path)
        except files.UnreadableFile as exc:
            if exc.refusal.missing:
                raise PlaitError("E004", f"scripted model file '{name}' not found") from None
            where = f"scripted model file '{files.shown(name)}'"
            raise PlaitError("E019", f"{where}: {exc.refusal.reason}") from None
        return cls.parse(spec, text)

    @classmethod
    def parse(cls, spec: str, text: str) -> ScriptedModel:
        """Check the text of a scripted file; every problem is reported, the first leads."""
        where = f"scripted model file '{spec.partition(':')[2]}'"
        try:
            data = loads(text, unique_keys=True)
        except CanonicalJSONError as exc:
            raise PlaitError("E019", f"{where}: not valid JSON: {exc}") from exc
        problems: list[str] = []
        if isinstance(data, list):
            model = cls(spec, by_run=_responses(data, where, problems))
        elif isinstance(data, dict):
            by_node = {}
            for node, responses in data.items():
                if isinstance(responses, list):
                    by_node[node] = _responses(responses, f"{where}: node '{node}'", problems)
                else:
                    got = _kind(responses)
                    problems.append(f"{where}: node '{node}': expected a list of responses, {got}")
            model = cls(spec, by_node=by_node)
        else:
            problems.append(
                f"{where}: expected a list of responses or an object mapping node ids to lists, "
                f"{_kind(data)}"
            )
        if problems:
            raise PlaitError.from_problems([Problem("E019", p) for p in problems])
        return model

    async def stream(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        """``complete``'s answer, told in pieces first: text by words, arguments by chunks."""
        response = await self.complete(request)
        for piece in text_pieces(response.text or ""):
            on_delta(Delta("text", piece))
        for index, call in enumerate(response.tool_calls):
            arguments = dumps(call["arguments"])
            on_delta(Delta("tool_call", "", index, call["name"]))
            for start in range(0, len(arguments), ARGUMENT_CHUNK):
                piece = arguments[start : start + ARGUMENT_CHUNK]
                on_delta(Delta("tool_call", piece, index, call["name"]))
        return response

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The scripted answer of this turn, or the scripted failure as a ``ModelError``."""
        if self._by_run is not None:
            responses, ordinal, of = self._by_run, request.ordinal_in_run, ""
        else:
            assert self._by_node is not None
            responses = self._by_node.get(request.node, ())
            ordinal, of = request.ordinal_in_node, f" of node '{request.node}'"
        if ordinal >= len(responses):
            raise ModelError(
                "ExecutorError",
                f"scripted model {self.file}: no response left for LLM effect #{ordinal + 1}{of} "
                f"(the file has {len(responses)})",
            )
        scripted = responses[ordinal]
        if scripted.error is not None:
            raise ModelError(
                ERRORS[scripted.error],
                f"scripted model {self.file}: response #{ordinal + 1}{of} is a scripted "
                f"'{scripted.error}'",
            )
        prefix = f"call_{request.call_id[:12]}_"
        return ModelResponse(
            text=scripted.text,
            tool_calls=tuple(
                # a fresh copy per turn: the parsed file is shared by every turn of every run
                {"id": f"{prefix}{i}", "name": name, "arguments": copy.deepcopy(args)}
                for i, (name, args) in enumerate(scripted.tool_calls)
            ),
            input_tokens=scripted.input_tokens,
            output_tokens=scripted.output_tokens,
            stop_reason=None,
            model=self.spec,
        )


def text_pieces(text: str) -> list[str]:
    """``text`` word by word, spaces kept, so the pieces join back to exactly ``text``."""
    return _WORDS.findall(text)


def _responses(items: list[Any], where: str, problems: list[str]) -> tuple[ScriptedResponse, ...]:
    return tuple(
        _response(item, f"{where}: response #{i + 1}", problems) for i, item in enumerate(items)
    )


def _response(item: Any, where: str, problems: list[str]) -> ScriptedResponse:
    if not isinstance(item, dict):
        problems.append(f"{where}: expected an object, {_kind(item)}")
        return ScriptedResponse()
    _unknown_keys(item, RESPONSE_KEYS, where, problems)
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        problems.append(f"{where}: text must be a string, {_kind(text)}")
        text = None
    error = item.get("error")
    if error is not None and error not in ERRORS:
        problems.append(f"{where}: error must be one of {', '.join(ERRORS)}, got {error!r}")
        error = None
    # "all fields optional": null is as good as absent, for every field alike
    usage = _given(item, "usage", {})
    tokens = {key: 0 for key in USAGE_KEYS}
    if not isinstance(usage, dict):
        problems.append(f"{where}: usage must be an object, {_kind(usage)}")
    else:
        _unknown_keys(usage, USAGE_KEYS, f"{where}: usage", problems)
        for key in USAGE_KEYS:
            value = _given(usage, key, 0)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                tokens[key] = value
            else:
                problems.append(f"{where}: usage.{key} must be an integer >= 0, got {value!r}")
    calls = _given(item, "tool_calls", [])
    if not isinstance(calls, list):
        problems.append(f"{where}: tool_calls must be a list, {_kind(calls)}")
        calls = []
    tool_calls = []
    for i, call in enumerate(calls):
        at = f"{where}: tool_calls[{i}]"
        if not isinstance(call, dict):
            problems.append(f"{at}: expected an object, {_kind(call)}")
            continue
        _unknown_keys(call, TOOL_CALL_KEYS, at, problems)
        name, args = call.get("name"), _given(call, "arguments", {})
        if not isinstance(name, str) or not name:
            problems.append(f"{at}: name must be a non-empty string, got {name!r}")
        elif not isinstance(args, dict):
            problems.append(f"{at}: arguments must be an object, {_kind(args)}")
        else:
            tool_calls.append((name, args))
    return ScriptedResponse(
        text, tuple(tool_calls), tokens["input_tokens"], tokens["output_tokens"], error
    )


def _given(item: dict[str, Any], key: str, default: Any) -> Any:
    """``item[key]``, or ``default`` when the key is absent or null (both mean "not given")."""
    value = item.get(key)
    return default if value is None else value


def _unknown_keys(item: dict[str, Any], known: tuple[str, ...], where: str, out: list[str]) -> None:
    for key in item:
        if key not in known:
            out.append(f"{where}: unknown key '{key}' (known: {', '.join(known)})")


def _kind(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    names |= {list: "a list", dict: "an object", type(None): "null"}
    return f"got {names.get(type(value), type(value).__name__)}"
