"""Tools of MCP servers over stdio, streamable HTTP or SSE (docs/architecture.md §4, docs/mcp.md).

A tool ``{mcp: {command: ["mcp-server-time"], tool: get_current_time}}`` is a
tool the server started by ``command`` offers. The server runs as a child
process (never through a shell) in the workflow file's folder, with the
driver's environment plus the settings' optional ``env``. A tool
``{mcp: {url: "https://…/mcp", headers: {Authorization: "Bearer ${TOKEN}"}, tool: …}}``
is reached over streamable HTTP (``transport: sse`` for the older SSE transport);
``${NAME}`` in header and env values is read from the environment when the server
is reached, so secrets are never journaled nor pinned.

``McpPool`` holds one server per distinct spec for one run's drive (the pool that
listed the catalogue at start is handed to the first drive, so a server starts once):
started on first use, shared by every call of the drive, closed when the drive
ends (``aclose``). A server that closed its connection (it crashed) is replaced
by a fresh one on the next call. Each server's connection is opened and closed
by a task of its own, because the SDK's stdio transport must be left by the task
that entered it while calls come from many tasks.

What a server offered is pinned at run start (``fetch_catalogue``): each MCP
tool's description and input schema go into the run's manifest, so validating a
model's arguments, the tool offer and ``verify`` never ask the server again
(``workflow.pinning.with_catalogue`` fills a definition from a pinned catalogue).

This module reports what a server did: a tool result becomes an outcome here
(``is_error`` is ExecutorError; structured content, else ``{"content": [part, ...]}``
when it holds images — text and images as content parts, which reach the model as
text and images, not base64 text — else the text read as JSON when it is JSON, else
``{"text": ...}``); a failing connection raises
``McpServerError`` and an overrun of ``timeout_s`` raises ``TimeoutError``, which
the driver maps to failure causes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait.core.canonical import CanonicalJSONError, dumps, loads
from plait.core.errors import PlaitError, Problem
from plait.core.outcomes import Completed, EffectOutcome, Failed

if TYPE_CHECKING:
    from mcp import ClientSession

    from plait.workflow import Workflow

START_TIMEOUT_S = 60.0
"""How long a server may take to start and answer ``initialize``."""

CLOSE_TIMEOUT_S = 10.0
"""How long closing one server may take (the SDK escalates to a kill well before)."""


class McpServerError(Exception):
    """The server could not be started, failed the protocol, or closed the connection."""


TRANSPORTS = ("streamable-http", "sse")
"""How plait reaches a server given by ``url:`` (stdio servers are given by ``command:``)."""

IDEMPOTENCY_META_KEY = "plait/idempotency_key"
"""The ``_meta`` key of every ``tools/call`` that carries the effect's idempotency key."""

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(value: str, where: str) -> str:
    """``value`` with each ``${NAME}`` replaced by that environment variable.

    Header and env values are written as templates so a secret lives in the driver's
    environment only: the template is pinned, the value never is."""

    def variable(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if found is None:
            raise McpServerError(f"{where} needs the environment variable {name}, which is not set")
        return found

    return _VARIABLE.sub(variable, value)


@dataclass(frozen=True)
class ServerSpec:
    """What identifies one server: its argv and extra environment (stdio), or its URL,
    transport and header templates (HTTP)."""

    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    transport: str = "stdio"
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> ServerSpec:
        url = settings.get("url")
        if url is not None:
            transport = str(settings.get("transport") or TRANSPORTS[0])
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise McpServerError(f"mcp url must be an http(s) URL, got {url!r}")
            if transport not in TRANSPORTS:
                raise McpServerError(f"mcp transport must be one of {', '.join(TRANSPORTS)}")
            headers = settings.get("headers") or {}
            return cls(url=url, transport=transport, headers=_pairs(headers))
        command = settings.get("command")
        if isinstance(command, str) or not isinstance(command, Sequence) or not command:
            raise McpServerError(f"mcp settings need a non-empty command list, got {command!r}")
        env = settings.get("env") or {}
        return cls(tuple(str(part) for part in command), _pairs(env))

    @property
    def label(self) -> str:
        return self.url if self.url is not None else shlex.join(self.command)

    def resolved_env(self) -> dict[str, str]:
        """The stdio server's environment: the driver's plus ``env:`` (``${NAME}`` expanded)."""
        extra = {k: expand(v, f"MCP server {self.label}: env {k}") for k, v in self.env}
        return {**os.environ, **extra}

    def resolved_headers(self) -> dict[str, str]:
        """The HTTP headers to send, ``${NAME}`` expanded (never journaled nor pinned)."""
        return {k: expand(v, f"MCP server {self.label}: header {k}") for k, v in self.headers}


def _pairs(mapping: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in dict(mapping).items()))


def _why(exc: BaseException) -> str:
    """The innermost useful exception of an (anyio) exception group, as text."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _connection_lost(exc: BaseException) -> bool:
    """Whether a call failed because the connection is gone (not because of the call)."""
    import anyio
    from mcp.types import CONNECTION_CLOSED

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | OSError):
        return True
    # MCPError carries ``code`` (mcp 2.x), McpError ``error.code`` (mcp 1.x).
    code = getattr(exc, "code", None)
    if code is None:
        code = getattr(getattr(exc, "error", None), "code", None)
    return bool(code == CONNECTION_CLOSED)


class _Connection:
    """One server process and its session, owned by a task of its own."""

    def __init__(self, spec: ServerSpec, cwd: Path) -> None:
        self.spec = spec
        self.broken = False
        self._cwd = cwd
        self._session: ClientSession | None = None
        self._error: BaseException | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        # The server's stderr, kept for failure details (and off the driver's own stderr).
        self._errlog = tempfile.TemporaryFile(  # noqa: SIM115 (closed in close())
            "w+", encoding="utf-8", errors="replace"
        )
        self._task = asyncio.create_task(self._serve(), name=f"mcp server {spec.label}")

    async def _serve(self) -> None:
        from mcp import ClientSession

        try:
            async with self._transport() as streams, ClientSession(*streams[:2]) as session:
                await session.initialize()
                self._session = session
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            self._error = exc
        finally:
            self._session = None
            self._ready.set()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, ...]]:
        """The read and write streams of the server's transport: stdio, SSE or streamable HTTP."""
        spec = self.spec
        if spec.url is None:
            from mcp import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=spec.command[0],
                args=list(spec.command[1:]),
                env=spec.resolved_env(),
                cwd=self._cwd,
            )
            async with stdio_client(params, errlog=self._errlog) as streams:
                yield tuple(streams)
        elif spec.transport == "sse":
            from mcp.client.sse import sse_client

            async with sse_client(spec.url, headers=spec.resolved_headers()) as streams:
                yield tuple(streams)
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            async with (
                create_mcp_http_client(headers=spec.resolved_headers()) as client,
                streamable_http_client(spec.url, http_client=client) as streams,
            ):
                yield tuple(streams)

    def stderr_tail(self, lines: int = 10, chars: int = 2000) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._errlog.flush()
            self._errlog.seek(0)
            text = self._errlog.read().strip()
            tail = "\n".join(text.splitlines()[-lines:])
            return tail if len(tail) <= chars else "…" + tail[-(chars - 1) :]
        return ""

    def failure(self, what: str) -> McpServerError:
        tail = self.stderr_tail()
        return McpServerError(
            f"MCP server {self.spec.label}: {what}" + (f"\n{tail}" if tail else "")
        )

    async def session(self) -> ClientSession:
        try:
            await asyncio.wait_for(self._ready.wait(), START_TIMEOUT_S)
        except TimeoutError:
            self.broken = True
            raise self.failure(f"did not start within {START_TIMEOUT_S:g} s") from None
        if self._session is None:
            self.broken = True
            if isinstance(self._error, McpServerError):  # a setting it could not resolve
                raise self._error
            why = _why(self._error) if self._error is not None else "the connection closed"
            raise self.failure(f"cannot connect ({why})")
        return self._session

    @property
    def gone(self) -> bool:
        """Whether a call must not use this connection (it failed, or the server went away)."""
        return self.broken or self._task.done()

    async def close(self) -> None:
        self._stop.set()
        if not self._ready.is_set():  # still starting: nothing to say goodbye to
            self._task.cancel()
        # asyncio.wait never raises the task's own outcome; a cancel of the caller still does.
        _, pending = await asyncio.wait({self._task}, timeout=CLOSE_TIMEOUT_S)
        for task in pending:
            task.cancel()
        self._errlog.close()


class McpPool:
    """The MCP servers of one drive: one process per distinct command, started lazily."""

    def __init__(self, cwd: Path) -> None:
        self._cwd = cwd
        self._live: dict[ServerSpec, _Connection] = {}
        self._retired: list[_Connection] = []

    def _connection(self, spec: ServerSpec) -> _Connection:
        conn = self._live.get(spec)
        if conn is None or conn.gone:
            if conn is not None:
                self._retired.append(conn)
            conn = self._live[spec] = _Connection(spec, self._cwd)
        return conn

    async def list_tools(self, spec: ServerSpec) -> list[dict[str, Any]]:
        """Every tool the server offers: ``{name, description, input_schema}``, in its order."""
        conn = self._connection(spec)
        session = await conn.session()
        offered: list[dict[str, Any]] = []
        cursor: str | None = None
        try:
            while True:
                if cursor is None:
                    page = await session.list_tools()
                else:
                    from mcp.types import PaginatedRequestParams

                    page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
                offered.extend(_tool_entry(tool) for tool in page.tools)
                cursor = _field(page, "next_cursor", "nextCursor")
                if not cursor:
                    return offered
        except Exception as exc:
            if _connection_lost(exc):
                conn.broken = True
            raise conn.failure(f"listing its tools failed ({_why(exc)})") from exc

    async def call(
        self,
        settings: Mapping[str, Any],
        arguments: Mapping[str, Any],
        timeout_s: float | None,
        idempotency_key: str | None = None,
    ) -> EffectOutcome:
        """Call the tool ``settings`` names; raises McpServerError or TimeoutError.

        ``idempotency_key`` goes in the request's ``_meta`` (IDEMPOTENCY_META_KEY): a
        server that deduplicates can recognise a call re-sent after a crash."""
        spec = ServerSpec.of(settings)
        name = str(settings.get("tool"))
        conn = self._connection(spec)
        session = await conn.session()
        try:
            meta: Any = None if idempotency_key is None else {IDEMPOTENCY_META_KEY: idempotency_key}
            call = session.call_tool(name, dict(arguments), meta=meta)
            result = await (call if timeout_s is None else asyncio.wait_for(call, timeout_s))
        except TimeoutError:
            if timeout_s is None:
                raise
            raise TimeoutError(f"MCP tool '{name}' did not finish within {timeout_s:g} s") from None
        except Exception as exc:
            if _connection_lost(exc):
                conn.broken = True
                raise conn.failure(f"lost the connection calling '{name}' ({_why(exc)})") from exc
            raise conn.failure(f"calling '{name}' failed ({_why(exc)})") from exc
        return tool_outcome(result)

    async def aclose(self) -> None:
        """Stop every server this pool started."""
        conns = [*self._live.values(), *self._retired]
        self._live.clear()
        self._retired.clear()
        await asyncio.gather(*(conn.close() for conn in conns), return_exceptions=True)

    async def __aenter__(self) -> McpPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _field(obj: Any, name: str, legacy: str) -> Any:
    """A field of an SDK model: snake_case (mcp 2.x) or camelCase (mcp 1.x)."""
    return getattr(obj, name, getattr(obj, legacy, None))


def _plain(value: Any) -> Any:
    """A JSON value in canonical form; raises CanonicalJSONError when it has none."""
    return loads(dumps(value))


def _tool_entry(tool: Any) -> dict[str, Any]:
    schema = _field(tool, "input_schema", "inputSchema")
    return {
        "name": str(tool.name),
        "description": str(tool.description or ""),
        "input_schema": _plain(schema if schema is not None else {"type": "object"}),
    }


def tool_outcome(result: Any) -> EffectOutcome:
    """A ``CallToolResult`` as an effect outcome."""
    blocks = list(getattr(result, "content", None) or [])
    texts = [b.text for b in blocks if getattr(b, "type", None) == "text"]
    text = "\n".join(texts)
    if _field(result, "is_error", "isError"):
        return Failed("ExecutorError", text or "the MCP tool reported an error")
    structured = _field(result, "structured_content", "structuredContent")
    try:
        if structured is not None:
            return Completed(_plain(structured))
        if len(texts) != len(blocks):  # images as content parts, the model sees them
            return Completed({"content": [_content_part(b) for b in blocks]})
    except CanonicalJSONError as exc:
        return Failed("ExecutorError", f"MCP tool returned a value that is not JSON: {exc}")
    try:
        return Completed(loads(text))
    except CanonicalJSONError:
        return Completed({"text": text})


def _content_part(block: Any) -> Any:
    """One content block of a result: text and images as content parts (plait.core.parts),
    which reach the model as text and images; audio and resources as the server sent them."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": str(block.text)}
    media_type = _field(block, "mime_type", "mimeType")
    if kind == "image" and isinstance(block.data, str) and isinstance(media_type, str):
        return {"type": "image", "media_type": media_type, "data": block.data}
    return _plain(block.model_dump(mode="json", by_alias=True, exclude_none=True))


def tool_node_arguments(
    schema: Mapping[str, Any] | None, context: Mapping[str, Any]
) -> dict[str, Any]:
    """A tool node's arguments: the context keys the schema names (§4: others are ignored).

    A schema naming no properties, or allowing additional ones, gets the whole context.
    """
    properties = (schema or {}).get("properties")
    if not isinstance(properties, Mapping) or (schema or {}).get("additionalProperties") not in (
        None,
        False,
    ):
        return dict(context)
    return {key: value for key, value in context.items() if key in properties}


# -- the pinned catalogue ----------------------------------------------------------


def pool_for(workflow: Workflow) -> McpPool | None:
    """A pool for a run of ``workflow`` when it has MCP tools (else None)."""
    if any(tool.mcp is not None for tool in workflow.tools.values()):
        return McpPool(workflow.base_dir)
    return None


async def fetch_catalogue(
    workflow: Workflow, pool: McpPool | None = None
) -> dict[str, dict[str, Any]]:
    """What each MCP tool of ``workflow`` is, as its server describes it (run start).

    ``pool``: the servers are started there and left running for the run's drive
    (each server starts once per run); without one they are stopped when listed.

    ``{tool name: {"name": server's tool name, "description", "input_schema"}}``, and
    for a tool with ``tools: "*"`` ``{tool name: {"tools": [every such entry]}}``;
    empty without MCP tools. A server that cannot be listed, or that does not offer
    the tool, is PLAIT-E004 (every such tool is reported).
    """
    tools = {name: tool for name, tool in sorted(workflow.tools.items()) if tool.mcp is not None}
    if not tools:
        return {}
    workflow.plan()  # a definition with malformed mcp settings fails with its own problems
    specs = {name: ServerSpec.of(tool.mcp or {}) for name, tool in tools.items()}
    distinct = list(dict.fromkeys(specs.values()))
    async with contextlib.AsyncExitStack() as stack:
        if pool is None:
            pool = await stack.enter_async_context(McpPool(workflow.base_dir))
        listed = await asyncio.gather(
            *(pool.list_tools(spec) for spec in distinct), return_exceptions=True
        )
    offers = dict(zip(distinct, listed, strict=True))
    catalogue: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for name, tool in tools.items():
        spec, wanted = specs[name], str((tool.mcp or {}).get("tool"))
        offer = offers[spec]
        if isinstance(offer, BaseException):
            if not isinstance(offer, Exception):
                raise offer
            problems.append(Problem("E004", f"tool '{name}': {offer}"))
            continue
        if (tool.mcp or {}).get("tools") == "*":
            catalogue[name] = {"tools": offer}
            continue
        found = next((entry for entry in offer if entry["name"] == wanted), None)
        if found is None:
            names = ", ".join(entry["name"] for entry in offer) or "no tools"
            problems.append(
                Problem(
                    "E004",
                    f"tool '{name}': MCP server {spec.label} does not offer a tool '{wanted}'"
                    f" (it offers: {names})",
                )
            )
            continue
        catalogue[name] = found
    if problems:
        raise PlaitError.from_problems(problems)
    return catalogue
