"""A small MCP server over stdio for the failure paths: errors, slowness, crashes, text.

Run as ``python toy_server.py``; every tool answers from this process, so ``pid``
tells which server process a call reached.
"""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import MCPServer
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


if __name__ == "__main__":
    asyncio.run(server.run_stdio_async())
