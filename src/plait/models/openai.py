"""The OpenAI adapter (chat completions), also for OpenAI-compatible servers (Ollama, vLLM).

It turns the loop's journal-shaped transcript into chat messages and the answer
back into a ``ModelResponse``; every provider error becomes a ``ModelError``
here and nowhere else. Retries with backoff are the SDK's (``max_retries``) and
stay invisible to the journal. Chat completions have no ``is_error`` on tool
results, so a failed tool result is sent as ``Error: <content>``. Tool-call
arguments that are not a JSON object are kept as ``{"_raw": <text>}``: the
loop's argument check then sends the model a corrective re-prompt, and the raw
text goes back to the provider verbatim if the transcript is sent again.

``stream`` sends the same request with ``stream: true`` (usage included), tells the
listener each text, tool-argument and reasoning piece as it comes, and assembles the
chunks into the completion ``parse_completion`` reads, so a streamed turn journals the
bytes a plain one would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import openai
from openai import AsyncOpenAI

from plait.core.canonical import CanonicalJSONError, dumps, loads
from plait.core.parts import result_parts
from plait.models.base import (
    RAW_ARGUMENTS,
    AdapterSettings,
    Delta,
    ModelError,
    ModelRequest,
    ModelResponse,
    OnDelta,
    ToolSpec,
    excerpt,
    provider_failure,
    system_text,
)
from plait.models.parts import images_message, is_parts, openai_part, tool_text
from plait.models.strict_schema import strict_answer, strict_schema

ERROR_PREFIX = "Error: "
DEFAULT_BASE_URL = "https://api.openai.com/v1"

# What OpenAI and the compatible servers say when the prompt does not fit
# (OpenAI's code; vLLM's and llama.cpp's messages).
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_PHRASES = ("maximum context length", "context length", "context size", "context window")


class OpenAIModel:
    """Chat completions through ``AsyncOpenAI``; the client is made on first use."""

    def __init__(
        self,
        model: str,
        *,
        spec: str | None = None,
        settings: AdapterSettings | None = None,
        base_url: str | None = None,
        compatible: bool = False,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.model = model
        self.spec = spec or (
            f"openai-compatible:{base_url}:{model}" if compatible else f"openai:{model}"
        )
        self.base_url = base_url
        self.compatible = compatible
        self.settings = settings or AdapterSettings()
        self._client = client

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            params = chat_request(request, self.model, compatible=self.compatible)
            completion = await self._sdk().chat.completions.create(**params)
            return strict_answer(parse_completion(completion, self.model, request.call_id), request)
        except Exception as exc:
            raise model_error(exc, self.endpoint()) from exc

    async def stream(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        """The turn with ``stream: true``: each piece goes to ``on_delta`` as it arrives."""
        try:
            params = chat_request(request, self.model, compatible=self.compatible)
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
            chunks = ChunkAssembly(on_delta)
            stream = await self._sdk().chat.completions.create(**params)
            async for chunk in stream:
                chunks.add(chunk)
            completion = chunks.completion(self.model)
            return strict_answer(parse_completion(completion, self.model, request.call_id), request)
        except Exception as exc:
            raise model_error(exc, self.endpoint()) from exc

    def endpoint(self) -> tuple[str, str, str]:
        """(provider, base URL, model): what a provider failure names."""
        if self._client is not None:
            base_url = str(self._client.base_url)
        else:
            base_url = self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        return ("openai-compatible" if self.compatible else "openai", base_url, self.model)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

    def _sdk(self) -> AsyncOpenAI:
        if self._client is None:
            options: dict[str, Any] = {"max_retries": self.settings.max_retries}
            if self.settings.timeout_s is not None:
                options["timeout"] = self.settings.timeout_s
            if self.compatible:
                # local servers ignore the key, but the SDK refuses to run without one
                options["api_key"] = os.environ.get("OPENAI_API_KEY") or "unused"
            self._client = AsyncOpenAI(base_url=self.base_url, **options)
        return self._client


def chat_request(request: ModelRequest, model: str, *, compatible: bool = False) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for one turn."""
    params: dict[str, Any] = {"model": model, "messages": chat_messages(request)}
    # OpenAI's newer models accept only max_completion_tokens; local servers know max_tokens
    params["max_tokens" if compatible else "max_completion_tokens"] = request.max_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.tools:
        params["tools"] = [_tool(spec) for spec in request.tools]
    if request.response_schema is not None:
        params["response_format"] = {
            "type": "json_schema",
            # not strict: strict mode accepts only a subset of JSON Schema; the loop
            # checks the answer against the whole schema anyway
            "json_schema": {"name": "response", "schema": dict(request.response_schema)},
        }
    return params


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The journal-shaped transcript as chat messages, ONE system message first.

    The system message holds the transcript's ``system`` entries (the node's instruction,
    engine epoch 2 on) and then the request's ``instructions`` (governance guidance).
    It is sent as ``system`` to every model: OpenAI's reasoning models take a system
    message as their developer message, and compatible servers know only ``system``.
    """
    messages: list[dict[str, Any]] = []
    system = system_text(request)
    if system:
        messages.append({"role": "system", "content": system})
    shown: list[dict[str, Any]] = []  # images of tool results: after the round's results
    for entry in request.messages:
        role = entry["role"]
        if shown and role != "tool":
            messages.extend(shown)
            shown = []
        if role == "system":
            continue
        if role == "user":
            messages.append({"role": "user", "content": user_content(entry["content"])})
        elif role == "assistant":
            calls = entry.get("tool_calls") or ()
            message: dict[str, Any] = {"role": "assistant", "content": entry.get("text")}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": _arguments_text(call)},
                    }
                    for call in calls
                ]
            elif message["content"] is None:
                message["content"] = ""
            messages.append(message)
        elif role == "tool":
            parts = result_parts(entry["content"])
            if parts is not None:  # a tool message holds text only: images follow as a user's
                content = tool_text(parts)
                shown.append(images_message(entry["tool_call_id"], parts))
            else:
                content = as_text(entry["content"])
            if entry.get("is_error"):
                content = ERROR_PREFIX + content
            messages.append(
                {"role": "tool", "tool_call_id": entry["tool_call_id"], "content": content}
            )
        else:
            raise ValueError(f"transcript entry with unknown role {role!r}")
    messages.extend(shown)
    return messages


def parse_completion(completion: Any, model: str, turn: str = "") -> ModelResponse:
    """A ``ChatCompletion`` as a ``ModelResponse`` (the first choice); ``turn``: the turn's
    call id, from which a tool call the provider sent without an id of its own gets one."""
    if isinstance(completion, str | bytes):  # the SDK's answer to a body that is not JSON
        raise ModelError(
            "ExecutorError", f"the provider's answer is not JSON: {excerpt(completion)}"
        )
    if not completion.choices:
        raise ModelError("ExecutorError", "the provider answered without a choice")
    choice = completion.choices[0]
    message = choice.message
    text = message.content
    if text is None and getattr(message, "refusal", None):
        text = message.refusal
    calls: list[dict[str, Any]] = []
    for index, call in enumerate(message.tool_calls or ()):
        function = getattr(call, "function", None)
        if function is not None:
            name, arguments = function.name, parse_arguments(function.arguments)
        else:  # a custom (free-text) tool call: plait never offers one, keep it visible anyway
            name, arguments = call.custom.name, {RAW_ARGUMENTS: call.custom.input}
        # Some compatible servers send no id, or the same id twice: the tool results must
        # still say which call they answer (and the Agent API answers calls by id).
        used = {c["id"] for c in calls}
        call_id = call.id if call.id and call.id not in used else f"call_{turn[:12]}_{index}"
        calls.append({"id": call_id, "name": name, "arguments": arguments})
    usage = completion.usage
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        input_tokens=(usage.prompt_tokens or 0) if usage else 0,
        output_tokens=(usage.completion_tokens or 0) if usage else 0,
        stop_reason=choice.finish_reason,
        model=completion.model or model,
    )


class ChunkAssembly:
    """Streamed ``ChatCompletionChunk``s put back together as one completion.

    Only the first choice counts (plait asks for one). Tool calls are gathered by their
    ``index``: the first piece carries the id and name, later ones more argument text.
    Some compatible servers send reasoning as ``reasoning_content`` or ``reasoning``: it
    is told as ``thinking`` and, as in a plain completion, not kept.
    """

    def __init__(self, on_delta: OnDelta) -> None:
        self._on_delta = on_delta
        self._text: list[str] | None = None
        self._refusal: list[str] | None = None
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._model: str | None = None
        self._usage: Any = None
        self._answered = False  # a first choice came

    def add(self, chunk: Any) -> None:
        if isinstance(chunk, str | bytes):  # a stream that is not chunks of JSON
            raise ModelError(
                "ExecutorError", f"the provider's stream is not JSON: {excerpt(chunk)}"
            )
        self._model = getattr(chunk, "model", None) or self._model
        self._usage = getattr(chunk, "usage", None) or self._usage
        for choice in getattr(chunk, "choices", None) or ():
            if choice.index != 0:
                continue
            self._answered = True
            self._finish = choice.finish_reason or self._finish
            self._delta(choice.delta)

    def _delta(self, delta: Any) -> None:
        if delta is None:
            return
        extra = getattr(delta, "model_extra", None) or {}
        thinking = extra.get("reasoning_content") or extra.get("reasoning")
        if isinstance(thinking, str) and thinking:
            self._on_delta(Delta("thinking", thinking))
        if delta.content is not None:
            self._text = (self._text or []) + [delta.content]
            if delta.content:
                self._on_delta(Delta("text", delta.content))
        if getattr(delta, "refusal", None):
            self._refusal = (self._refusal or []) + [delta.refusal]
            self._on_delta(Delta("text", delta.refusal))
        for piece in delta.tool_calls or ():
            call = self._calls.setdefault(piece.index, {"id": None, "name": None, "args": []})
            function = piece.function
            call["id"] = call["id"] or piece.id
            named = function is not None and function.name and not call["name"]
            if named:
                call["name"] = function.name
            arguments = (function.arguments if function is not None else None) or ""
            if arguments or named:
                self._on_delta(Delta("tool_call", arguments, piece.index, call["name"]))
            if arguments:
                call["args"].append(arguments)

    def completion(self, model: str) -> Any:
        """The chunks as the ``ChatCompletion`` a plain request would have answered."""
        calls = [
            SimpleNamespace(
                id=call["id"],
                function=SimpleNamespace(name=call["name"] or "", arguments="".join(call["args"])),
            )
            for _, call in sorted(self._calls.items())
        ]
        text = None if self._text is None else "".join(self._text)
        if text == "" and calls:
            text = None  # an empty opening piece of a tool-call turn: a plain answer says null
        message = SimpleNamespace(
            content=text,
            refusal=None if self._refusal is None else "".join(self._refusal),
            tool_calls=calls or None,
        )
        choice = SimpleNamespace(message=message, finish_reason=self._finish)
        if not self._answered:
            raise ModelError(
                "ExecutorError",
                "the provider's stream held no answer (does the server support stream: true?)",
            )
        return SimpleNamespace(choices=[choice], usage=self._usage, model=self._model or model)


def parse_arguments(text: str | None) -> dict[str, Any]:
    """Tool-call arguments as an object: ``{}`` if empty, ``{"_raw": text}`` if not an object."""
    if text is None or not text.strip():
        return {}
    try:
        value = loads(text)
    except CanonicalJSONError:
        return {RAW_ARGUMENTS: text}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS: text}


def model_error(exc: Exception, endpoint: tuple[str, str, str]) -> ModelError:
    """The one place OpenAI SDK errors become failure causes.

    Every error of the provider itself — a connection that never opened (refused, unknown
    host, TLS), a request that timed out, any 4xx or 5xx — is a ``ProviderError`` naming
    ``endpoint``: the SDK has already retried what could succeed when sent again (408, 409,
    429, 5xx, timeouts and lost connections, ``llm.max_retries`` times with backoff), so
    the turn is not sent again. An answer that came back unusable is an ``ExecutorError``,
    which the loop re-sends; a prompt the provider found too long folds.
    """
    if isinstance(exc, ModelError):
        return exc
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, openai.BadRequestError) and _context_too_long(exc):
        return ModelError("ContextTooLong", detail)
    if isinstance(exc, openai.APIStatusError | openai.APIConnectionError):  # timeouts too
        provider, base_url, model = endpoint
        connection = isinstance(exc, openai.APIConnectionError)
        return provider_failure(
            exc, provider=provider, base_url=base_url, model=model, connection=connection
        )
    if isinstance(exc, openai.APIError):
        return ModelError("ExecutorError", detail)
    if isinstance(exc, json.JSONDecodeError):  # a body that claims to be JSON and is not
        return ModelError("ExecutorError", f"the provider's answer is not JSON ({detail})")
    return ModelError("Unknown", detail)


def user_content(content: Any) -> str | list[dict[str, Any]]:
    """A user entry's content: content parts as chat parts, anything else as text."""
    if is_parts(content):
        return [openai_part(part) for part in content]
    return as_text(content)


def as_text(content: Any) -> str:
    """Transcript content as provider text: strings as they are, anything else canonical JSON."""
    return content if isinstance(content, str) else dumps(content)


def _tool(spec: ToolSpec) -> dict[str, Any]:
    schema = strict_schema(spec.input_schema) if spec.strict else dict(spec.input_schema)
    function: dict[str, Any] = {"name": spec.name, "parameters": schema}
    if spec.description:
        function["description"] = spec.description
    if spec.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _arguments_text(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments") or {}
    raw = arguments.get(RAW_ARGUMENTS)
    if len(arguments) == 1 and isinstance(raw, str):
        return raw
    return dumps(arguments)


def _context_too_long(exc: openai.BadRequestError) -> bool:
    if exc.code in _CONTEXT_CODES or getattr(exc, "type", None) in _CONTEXT_CODES:
        return True
    message = str(getattr(exc, "message", exc)).lower()
    return any(phrase in message for phrase in _CONTEXT_PHRASES)
