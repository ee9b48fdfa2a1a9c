"""The Anthropic adapter (Messages API).

It turns the loop's journal-shaped transcript into Anthropic messages — tool
results become ``tool_result`` blocks with ``is_error``, consecutive entries of
one role are merged because the API wants the roles to alternate — and the
answer back into a ``ModelResponse``. Every provider error becomes a
``ModelError`` here and nowhere else; retries with backoff are the SDK's
(``max_retries``) and stay invisible to the journal.

A response schema is asked for in the system text, and an answer wrapped in a
code fence is unwrapped; the loop checks the schema itself. A turn that stopped
because the context window filled up (``model_context_window_exceeded``) is
ContextTooLong like a prompt the API refused, so the loop folds.

``stream`` sends the same request through ``messages.stream``, tells the listener each
text, tool-input and thinking piece as it comes, and parses the SDK's final message
exactly as ``complete`` parses its answer, so both journal the same bytes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import anthropic
from anthropic import AsyncAnthropic

from plait.core.canonical import dumps
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
from plait.models.parts import anthropic_part, is_parts

SCHEMA_INSTRUCTION = (
    "When you give your final answer, reply with only a JSON object that matches this "
    "JSON schema, with no other text and no code fence:\n"
)
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n(.*?)\n?```$", re.S)
_TOO_LONG = ("prompt is too long", "prompt_too_long")
WINDOW_FULL = "model_context_window_exceeded"
DEFAULT_BASE_URL = "https://api.anthropic.com"


class AnthropicModel:
    """Messages through ``AsyncAnthropic``; the client is made on first use."""

    def __init__(
        self,
        model: str,
        *,
        spec: str | None = None,
        settings: AdapterSettings | None = None,
        client: AsyncAnthropic | None = None,
    ) -> None:
        self.model = model
        self.spec = spec or f"anthropic:{model}"
        self.settings = settings or AdapterSettings()
        self._client = client

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            params = messages_request(request, self.model)
            if self.settings.timeout_s is not None:
                params["timeout"] = self.settings.timeout_s
            message = await self._sdk().messages.create(**params)
            return parse_message(
                message, self.model, json_answer=request.response_schema is not None
            )
        except Exception as exc:
            raise model_error(exc, self.endpoint()) from exc

    async def stream(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse:
        """The turn through ``messages.stream``: each piece goes to ``on_delta`` as it comes."""
        try:
            params = messages_request(request, self.model)
            if self.settings.timeout_s is not None:
                params["timeout"] = self.settings.timeout_s
            tell = StreamDeltas(on_delta)
            async with self._sdk().messages.stream(**params) as stream:
                async for event in stream:
                    tell(event)
                message = await stream.get_final_message()
            return parse_message(
                message, self.model, json_answer=request.response_schema is not None
            )
        except Exception as exc:
            raise model_error(exc, self.endpoint()) from exc

    def endpoint(self) -> tuple[str, str, str]:
        """(provider, base URL, model): what a provider failure names."""
        if self._client is not None:
            base_url = str(self._client.base_url)
        else:
            base_url = os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        return ("anthropic", base_url, self.model)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

    def _sdk(self) -> AsyncAnthropic:
        if self._client is None:
            self._client = AsyncAnthropic(max_retries=self.settings.max_retries)
        return self._client


def messages_request(request: ModelRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for one turn."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": anthropic_messages(request.messages),
    }
    system = [system_text(request)] if system_text(request) else []
    if request.response_schema is not None:
        system.append(SCHEMA_INSTRUCTION + dumps(request.response_schema))
    if system:
        params["system"] = "\n\n".join(system)
    if request.temperature is not None:
        # anthropic>=1.0 dropped sampling keywords from create(); the API still takes them
        # (newer models refuse them, so they are sent only when the workflow sets one)
        params["extra_body"] = {"temperature": request.temperature}
    if request.tools:
        params["tools"] = [_tool(spec) for spec in request.tools]
    return params


def anthropic_messages(entries: tuple[Mapping[str, Any], ...]) -> list[dict[str, Any]]:
    """Journal-shaped entries as alternating user/assistant messages of content blocks."""
    messages: list[dict[str, Any]] = []
    for entry in entries:
        if entry["role"] == "system":
            continue  # the request's system text (``system_text``)
        role, blocks = _blocks(entry)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    return messages


def parse_message(message: Any, model: str, *, json_answer: bool = False) -> ModelResponse:
    """A ``Message`` as a ``ModelResponse``; text blocks are joined, tool uses become calls."""
    if isinstance(message, str | bytes):  # the SDK's answer to a body that is not JSON
        raise ModelError("ExecutorError", f"the provider's answer is not JSON: {excerpt(message)}")
    if message.stop_reason == WINDOW_FULL:
        raise ModelError(
            "ContextTooLong", f"the answer stopped at the context window ({WINDOW_FULL})"
        )
    texts, calls = [], []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments = (
                block.input if isinstance(block.input, dict) else {RAW_ARGUMENTS: block.input}
            )
            calls.append({"id": block.id, "name": block.name, "arguments": arguments})
    text = "".join(texts) if texts else None
    if json_answer and text is not None and not calls:
        fenced = _FENCE.match(text.strip())
        text = fenced.group(1) if fenced else text
    usage = message.usage
    # the whole prompt, cached parts included: folding measures what the window holds
    prompt = usage.input_tokens + sum(
        getattr(usage, key, None) or 0
        for key in ("cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        input_tokens=prompt,
        output_tokens=usage.output_tokens,
        stop_reason=message.stop_reason,
        model=message.model or model,
    )


class StreamDeltas:
    """The stream's raw block events as deltas; tool calls are numbered in the turn's order."""

    def __init__(self, on_delta: OnDelta) -> None:
        self._on_delta = on_delta
        self._calls: dict[int, tuple[int, str]] = {}  # block index -> (call index, name)

    def __call__(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "content_block_start" and event.content_block.type == "tool_use":
            call = (len(self._calls), event.content_block.name)
            self._calls[event.index] = call
            self._on_delta(Delta("tool_call", "", call[0], call[1]))
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                self._on_delta(Delta("text", delta.text))
            elif delta.type == "thinking_delta" and delta.thinking:
                self._on_delta(Delta("thinking", delta.thinking))
            elif delta.type == "input_json_delta" and delta.partial_json:
                index, name = self._calls.get(event.index, (0, None))
                self._on_delta(Delta("tool_call", delta.partial_json, index, name))


def model_error(exc: Exception, endpoint: tuple[str, str, str]) -> ModelError:
    """The one place Anthropic SDK errors become failure causes (the rules of
    ``plait.models.openai.model_error``: provider failures are a ``ProviderError`` naming
    ``endpoint`` once the SDK's retries are spent, unusable answers an ``ExecutorError``)."""
    if isinstance(exc, ModelError):
        return exc
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, anthropic.APIStatusError) and _too_long(exc):
        return ModelError("ContextTooLong", detail)
    if isinstance(exc, anthropic.APIStatusError | anthropic.APIConnectionError):  # timeouts too
        provider, base_url, model = endpoint
        connection = isinstance(exc, anthropic.APIConnectionError)
        return provider_failure(
            exc, provider=provider, base_url=base_url, model=model, connection=connection
        )
    if isinstance(exc, anthropic.APIError):
        return ModelError("ExecutorError", detail)
    if isinstance(exc, json.JSONDecodeError):  # a body that claims to be JSON and is not
        return ModelError("ExecutorError", f"the provider's answer is not JSON ({detail})")
    return ModelError("Unknown", detail)


def _blocks(entry: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    role = entry["role"]
    if role == "user":
        content = entry["content"]
        if is_parts(content):
            return "user", [anthropic_part(p) for p in content]
        return "user", [_text_block(content) or {"type": "text", "text": "(empty)"}]
    if role == "assistant":
        text = _text_block(entry.get("text"))
        blocks = [text] if text else []
        blocks += [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": dict(c["arguments"])}
            for c in entry.get("tool_calls") or ()
        ]
        return "assistant", blocks or [{"type": "text", "text": "(no answer)"}]
    if role == "tool":
        content = entry["content"]
        parts = result_parts(content)
        block = {
            "type": "tool_result",
            "tool_use_id": entry["tool_call_id"],
            "content": (
                [anthropic_part(p) for p in parts]  # images go to the model as images
                if parts is not None
                else content
                if isinstance(content, str)
                else dumps(content)
            ),
        }
        if entry.get("is_error"):
            block["is_error"] = True
        return "user", [block]
    raise ValueError(f"transcript entry with unknown role {role!r}")


def _text_block(content: Any) -> dict[str, Any] | None:
    """A text block, or None for no text (the API refuses empty text blocks)."""
    if content is None:
        return None
    text = content if isinstance(content, str) else dumps(content)
    return {"type": "text", "text": text} if text else None


def _tool(spec: ToolSpec) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": spec.name, "input_schema": dict(spec.input_schema)}
    if spec.description:
        tool["description"] = spec.description
    return tool


def _too_long(exc: anthropic.APIStatusError) -> bool:
    if exc.status_code == 413:  # request_too_large: the transcript outgrew the request limit
        return True
    if exc.status_code != 400:
        return False
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return any(needle in str(message or exc).lower() for needle in _TOO_LONG)
