"""The model protocol: one request in, one response or one ``ModelError`` out.

The driver hands an adapter the loop's journal-shaped transcript (docs/architecture.md
§6) and journals what comes back through ``ModelResponse.to_json``. Adapters
own everything provider-specific — message shapes, provider retries with
backoff, mapping provider errors to failure causes — and never touch the journal,
the clock of the run or the core. Turning a spec string
(``openai:gpt-4o-mini``, ``scripted:responses.json``) into an adapter is
``registry.py``'s job; this module imports no adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from plait.core.canonical import dumps
from plait.core.errors import PlaitError

RAW_ARGUMENTS = "_raw"
"""The key under which an adapter keeps tool-call arguments that were not a JSON object
(``{"_raw": <the provider's text>}``), so the answer stays journal-shaped while the
loop's argument check refuses the call (``unparsed_arguments``)."""

CAUSES = (
    "Timeout",
    "ExecutorError",
    "SchemaValidationFailed",
    "ContextTooLong",
    "Unknown",
    "ProviderError",
)
"""The failure causes an adapter may report (docs/architecture.md §3.3); SchemaValidationFailed
is for a provider that enforces the response schema itself and refused the answer;
ProviderError for a provider that did not answer once its SDK's retries were spent."""


def provider_failure(
    exc: Exception, *, provider: str, base_url: str, model: str, connection: bool = False
) -> ModelError:
    """A provider's failure as the turn's ``ProviderError``, naming provider, base URL and model.

    Whoever reads a failed run must see which endpoint was down without opening the
    workflow file; the SDK's own message follows and, for a ``connection`` that never
    answered, what the socket said at the bottom of the chain (refused, unknown host, TLS,
    timed out) — the SDK says only "Connection error.".
    """
    detail = f"{type(exc).__name__}: {exc}"
    reason = _socket_reason(exc) if connection else None
    if reason is not None:
        detail += f" ({type(reason).__name__}: {reason})"
    where = f"provider {provider} at {base_url.rstrip('/')}, model '{model}'"
    return ModelError("ProviderError", f"{where}: {detail}")


def _socket_reason(exc: BaseException) -> BaseException | None:
    """The deepest ``OSError`` under ``exc`` (refused, unknown host, TLS), else its cause."""
    found, below = None, exc.__cause__ or exc.__context__
    for _ in range(16):  # the chain is short; the bound is against a cycle
        if below is None:
            break
        if isinstance(below, OSError):
            found = below
        below = below.__cause__ or below.__context__
    return found or exc.__cause__


@dataclass(frozen=True)
class ToolSpec:
    """One tool offered to the model: its name, what it is for, its JSON-schema input."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    strict: bool = False


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One LLM turn as the loop asks for it.

    ``messages`` are journal-shaped transcript entries; ``instructions`` is the
    system text (postures and the like). ``call_id``, ``node`` and the two
    ordinals identify the turn deterministically, so a scripted model answers a
    redelivered turn exactly as it answered the first delivery.
    """

    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[ToolSpec, ...] = ()
    response_schema: Mapping[str, Any] | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    instructions: str | None = None
    call_id: str
    node: str
    ordinal_in_run: int
    ordinal_in_node: int


def system_text(request: ModelRequest) -> str:
    """The system text of a turn: the transcript's ``system`` entries (the node's
    instruction, engine epoch 2 on), then ``instructions`` (governance guidance), each
    separated by a blank line; empty when there is none."""
    texts = [str(m["content"]) for m in request.messages if m.get("role") == "system"]
    if request.instructions:
        texts.append(request.instructions)
    return "\n\n".join(t for t in texts if t)


@dataclass(frozen=True, kw_only=True)
class ModelResponse:
    """What a model answered: text and/or tool calls, with the provider's token counts.

    Each tool call is ``{"id", "name", "arguments"}`` with ``arguments`` a JSON
    object. ``input_tokens`` is the provider's own prompt-token count (what
    folding measures).
    """

    text: str | None
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    model: str = ""
    spec: str | None = None
    """The spec of the model that answered, set only under ``llm.fallback`` (so the
    journal of a run without fallbacks keeps its bytes)."""
    fallbacks: tuple[Mapping[str, str], ...] = ()
    """``{"spec", "cause", "detail"}`` of each model that failed this turn before ``spec``
    answered."""

    @property
    def usage(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}

    def to_json(self) -> dict[str, Any]:
        """The journaled result (canonical-JSON-able)."""
        return {
            "text": self.text,
            "tool_calls": [
                {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                for c in self.tool_calls
            ],
            "usage": self.usage,
            "stop_reason": self.stop_reason,
            "model": self.model,
            **({} if self.spec is None else {"spec": self.spec}),
            **({"fallbacks": [dict(f) for f in self.fallbacks]} if self.fallbacks else {}),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ModelResponse:
        """The inverse of ``to_json``, for replay from the journal."""
        usage = data.get("usage") or {}
        return ModelResponse(
            text=data.get("text"),
            tool_calls=tuple(
                {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                for c in data.get("tool_calls") or ()
            ),
            input_tokens=int(usage.get("input_tokens", 0)),
            output_tokens=int(usage.get("output_tokens", 0)),
            stop_reason=data.get("stop_reason"),
            model=data.get("model", ""),
            spec=data.get("spec"),
            fallbacks=tuple(data.get("fallbacks") or ()),
        )


def unparsed_arguments(arguments: Any) -> str | None:
    """The text a provider sent as a call's arguments when it was not a JSON object, else None."""
    if isinstance(arguments, Mapping) and len(arguments) == 1 and RAW_ARGUMENTS in arguments:
        raw = arguments[RAW_ARGUMENTS]
        return raw if isinstance(raw, str) else dumps(raw)
    return None


def excerpt(body: str | bytes, limit: int = 200) -> str:
    """The start of a provider's unexpected body (quoted), for a failure detail."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return repr(text if len(text) <= limit else text[:limit] + "…")


class ModelError(Exception):
    """A turn that failed; ``cause`` is one of ``CAUSES`` and decides whether it is retried."""

    def __init__(self, cause: str, detail: str) -> None:
        if cause not in CAUSES:
            raise ValueError(f"unknown model failure cause {cause!r}")
        self.cause = cause
        self.detail = detail
        super().__init__(f"{cause}: {detail}")


@runtime_checkable
class Model(Protocol):
    """An adapter: ``spec`` names it as the workflow did, ``complete`` runs one turn."""

    spec: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


DELTA_KINDS = ("text", "tool_call", "thinking")


@dataclass(frozen=True)
class Delta:
    """A piece of a turn as the provider streams it: observation only, never journaled.

    ``kind`` is ``text`` (answer text), ``tool_call`` (a piece of a call's argument
    JSON; ``index`` says which call of the turn, ``name`` is the tool's once it is known) or
    ``thinking`` (reasoning text, where the provider sends it).
    """

    kind: str
    text: str
    index: int = 0
    name: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "text": self.text}
        if self.kind == "tool_call":
            data["index"] = self.index
            if self.name is not None:
                data["name"] = self.name
        return data


OnDelta = Callable[[Delta], None]
"""Told each delta of a streamed turn, in order; it must not block (it runs on the drive's loop)."""


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream a turn: ``stream`` tells ``on_delta`` each piece as it
    comes and returns exactly the ``ModelResponse`` that ``complete`` would have (so the
    journaled result has the same bytes whether or not anyone watched)."""

    async def stream(self, request: ModelRequest, on_delta: OnDelta) -> ModelResponse: ...


async def answer(model: Model, request: ModelRequest, on_delta: OnDelta | None) -> ModelResponse:
    """One turn of ``model``: streamed to ``on_delta`` when there is one and the model can
    stream, else an ordinary ``complete`` (deltas are observational; a model without
    ``stream`` just sends none)."""
    stream = getattr(model, "stream", None)
    if on_delta is None or stream is None:
        return await model.complete(request)
    response: ModelResponse = await stream(request, on_delta)
    return response


@dataclass(frozen=True)
class AdapterSettings:
    """Options every provider adapter takes (from ``model_from_spec``'s ``settings``)."""

    max_retries: int = 2
    timeout_s: float | None = None

    @staticmethod
    def read(settings: Mapping[str, Any] | None) -> AdapterSettings:
        """Known keys are taken, other keys are ignored (the whole ``llm:`` mapping may come)."""
        settings = settings or {}
        retries = settings.get("max_retries", 2)
        timeout = settings.get("timeout_s")
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise PlaitError("E019", f"llm: max_retries must be an integer >= 0, got {retries!r}")
        if timeout is not None and (
            not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0
        ):
            raise PlaitError("E019", f"llm: timeout_s must be a number > 0, got {timeout!r}")
        return AdapterSettings(retries, None if timeout is None else float(timeout))
