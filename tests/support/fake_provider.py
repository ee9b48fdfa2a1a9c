"""A fake LLM provider on loopback that speaks OpenAI chat completions and Anthropic
messages, plain or streamed as server-sent events, and records every request.

Each request is answered with the ``Answer`` at the front of ``answers`` (the last one
repeats), as one JSON body, or as SSE chunks when the request asked for ``stream``. The
streaming knobs make what tests and benchmarks need observable without sleeping in a
test: ``hold`` keeps the last chunk back until ``release`` is set (so a test can see a
delta while the turn is still in flight), ``sent_first`` is set once the first content
chunk went out, and ``first_byte_s`` / ``chunk_s`` delay the answer like a real
provider (benchmarks only: a plain answer waits for all its pieces, a stream sends
each piece ``chunk_s`` after the one before).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD_LIMIT_S = 60.0
"""A held chunk goes out after this long even unreleased, so a failing test ends."""


@dataclass(frozen=True)
class Call:
    """A tool call the fake answers with; ``arguments`` is sent in ``pieces`` pieces."""

    name: str
    arguments: dict[str, Any]
    id: str = "call_1"


@dataclass(frozen=True)
class Answer:
    """One turn's answer: text (sent in the given pieces), thinking, tool calls, usage."""

    pieces: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()
    thinking: tuple[str, ...] = ()
    input_tokens: int = 11
    output_tokens: int = 7

    @property
    def text(self) -> str | None:
        return "".join(self.pieces) if self.pieces else None


@dataclass
class FakeProvider:
    """The server; ``start()`` it, ``close()`` it. ``requests``: every JSON body received."""

    answers: list[Answer] = field(default_factory=lambda: [Answer(("Hello", " world", "."))])
    hold: bool = False
    ignore_stream: bool = False
    """Answer a ``stream`` request with one JSON body, as a server that cannot stream."""
    first_byte_s: float = 0.0
    chunk_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    sent_first: threading.Event = field(default_factory=threading.Event)
    arrivals: list[float] = field(default_factory=list)
    """``time.perf_counter()`` as each request arrived (benchmarks)."""
    held_until_released: list[bool] = field(default_factory=list)
    """For each held stream: whether ``release`` was set before the last chunk went out."""

    def start(self) -> FakeProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()  # each piece goes out at once, as a provider's do
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                provider.arrivals.append(time.perf_counter())
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                provider.requests.append(body)
                provider.paths.append(self.path)
                provider._answer(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    @property
    def openai_spec(self) -> str:
        return f"openai-compatible:{self.url}/v1:fake"

    # --- answering ---------------------------------------------------------------

    def _next(self) -> Answer:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        answer = self._next()
        anthropic = handler.path.endswith("/messages")
        if self.first_byte_s:
            time.sleep(self.first_byte_s)
        if not body.get("stream") or self.ignore_stream:
            if self.chunk_s:  # a provider generates the whole answer before it sends it
                time.sleep(self.chunk_s * max(len(answer.pieces) - 1, 0))
            whole = anthropic_message(answer) if anthropic else openai_completion(answer)
            data = json.dumps(whole).encode()
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.end_headers()
        frames = list(anthropic_events(answer) if anthropic else openai_chunks(answer))
        pieces_sent = 0
        for n, chunk in enumerate(frames):
            if n == len(frames) - 1 and self.hold:
                self.held_until_released.append(self.release.wait(HOLD_LIMIT_S))
            if _is_text_piece(chunk):
                if pieces_sent and self.chunk_s:  # the generation time between two pieces
                    time.sleep(self.chunk_s)
                pieces_sent += 1
            try:
                handler.wfile.write(chunk.encode())
                handler.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the client went away (a killed process)
            if n == 1:
                self.sent_first.set()


def _is_text_piece(frame: str) -> bool:
    """Whether an SSE frame carries a piece of answer text (of either API)."""
    return '"delta": {"content": ' in frame or '"type": "text_delta"' in frame


def openai_completion(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in answer.calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if answer.calls else "stop",
            }
        ],
        "usage": _openai_usage(answer),
    }


def _openai_usage(answer: Answer) -> dict[str, int]:
    total = answer.input_tokens + answer.output_tokens
    return {
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": total,
    }


def openai_chunks(answer: Answer) -> Iterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": None if answer.calls else ""})
    for thought in answer.thinking:
        yield chunk({"reasoning_content": thought})
    for piece in answer.pieces:
        yield chunk({"content": piece})
    for index, call in enumerate(answer.calls):
        start = {"index": index, "id": call.id, "type": "function"}
        yield chunk({"tool_calls": [start | {"function": {"name": call.name, "arguments": ""}}]})
        text = json.dumps(call.arguments)
        for at in range(0, len(text), 5):
            piece = {"index": index, "function": {"arguments": text[at : at + 5]}}
            yield chunk({"tool_calls": [piece]})
    yield chunk({}, "tool_calls" if answer.calls else "stop")
    usage = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1}
    usage |= {"model": "fake", "choices": [], "usage": _openai_usage(answer)}
    yield f"data: {json.dumps(usage)}\n\n"
    yield "data: [DONE]\n\n"


def anthropic_message(answer: Answer) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.thinking:
        content.append({"type": "thinking", "thinking": "".join(answer.thinking), "signature": "s"})
    if answer.text is not None:
        content.append({"type": "text", "text": answer.text})
    for call in answer.calls:
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake",
        "content": content,
        "stop_reason": "tool_use" if answer.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens},
    }


def anthropic_events(answer: Answer) -> Iterator[str]:
    def event(kind: str, body: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}\n\n"

    start = anthropic_message(answer) | {"content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": answer.input_tokens, "output_tokens": 1}
    yield event("message_start", {"message": start})
    index = 0
    if answer.thinking:
        block = {"type": "thinking", "thinking": "", "signature": ""}
        yield event("content_block_start", {"index": index, "content_block": block})
        for thought in answer.thinking:
            delta = {"type": "thinking_delta", "thinking": thought}
            yield event("content_block_delta", {"index": index, "delta": delta})
        delta = {"type": "signature_delta", "signature": "s"}
        yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
        index += 1
    if answer.pieces:
        block = {"type": "text", "text": ""}
        yield event("content_block_start", {"index": index, "content_block": block})
        for piece in answer.pieces:
            delta = {"type": "text_delta", "text": piece}
            yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
        index += 1
    for call in answer.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield event("content_block_start", {"index": index, "content_block": block})
        text = json.dumps(call.arguments)
        for at in range(0, len(text), 5):
            delta = {"type": "input_json_delta", "partial_json": text[at : at + 5]}
            yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
        index += 1
    stop = "tool_use" if answer.calls else "end_turn"
    usage = {"output_tokens": answer.output_tokens}
    yield event(
        "message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage}
    )
    yield event("message_stop", {})
