"""A small MCP server for the failure paths and the transports: errors, slowness, crashes,
text, what a call carried (``_meta``, headers, environment).

Run as ``python toy_server.py`` (stdio), ``python toy_server.py http`` (streamable HTTP)
or ``python toy_server.py sse``: the HTTP ones bind a free loopback port and print
``http://127.0.0.1:PORT/...`` on their first line once they accept connections. Every
tool answers from this process, so ``pid`` tells which server process a call reached.
With ``TOY_STARTS`` set, each start appends a line to that file (how many times a run
started the server).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

server = MCPServer("toy")


@server.tool(name="pid", description="The server's process id.")
def pid() -> dict:
    return {"pid": os.getpid()}


@server.tool(name="fail", description="Always reports an error.")
def fail(why: str = "no reason") -> dict:
    raise ToolError(f"failed on purpose: {why}")


@server.tool(name="slow", description="Answers after a while.")
async def slow(seconds: float) -> dict:
    await asyncio.sleep(seconds)
    return {"slept": seconds}


@server.tool(name="crash", description="Exits the server without answering.")
def crash() -> dict:
    os._exit(3)


@server.tool(name="say", description="Plain text content, no structured result.")
def say(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


@server.tool(name="seen", description="What the call carried: _meta, a header, an env var.")
def seen(ctx: Context, header: str = "authorization", variable: str = "TOY_SECRET") -> dict:
    meta = ctx.request_context.meta or {}
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    return {
        "meta": {k: v for k, v in dict(meta).items() if k.startswith("plait")},
        "header": headers.get(header),
        "env": os.environ.get(variable),
    }


_KEYS: list[str] = []


@server.tool(name="remember", description="Every idempotency key this process was sent so far.")
def remember(ctx: Context) -> dict:
    _KEYS.append(str((ctx.request_context.meta or {}).get("plait/idempotency_key")))
    return {"keys": list(_KEYS)}


def _mark_start() -> None:
    starts = os.environ.get("TOY_STARTS")
    if starts:
        with open(starts, "a", encoding="utf-8") as marks:
            marks.write(f"{os.getpid()}\n")


async def _serve_http(transport: str) -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if transport == "sse":
        app, path = server.sse_app(), "/sse"
    else:
        app, path = server.streamable_http_app(), "/mcp"
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    serving = asyncio.create_task(web.serve(sockets=[sock]))
    while not web.started:
        await asyncio.sleep(0.01)
    print(f"http://127.0.0.1:{port}{path}", flush=True)
    await serving


if __name__ == "__main__":
    _mark_start()
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        asyncio.run(server.run_stdio_async())
    else:
        asyncio.run(_serve_http(mode))
