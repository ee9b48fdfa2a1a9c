"""A tiny stdio MCP server (the ``mcp`` SDK) whose tool answers with an image and a
caption, as a screenshot or chart server does: what the model must see as an image.

Run as ``python mcp_image_server.py``; ``PICTURE`` is the PNG's base64 the tool returns.
"""

from __future__ import annotations

import base64

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ImageContent, TextContent

PICTURE = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16).decode()

server = MCPServer("pictures")


@server.tool(name="picture", description="A picture of a red square, with a caption.")
def picture() -> CallToolResult:
    return CallToolResult(
        content=[
            TextContent(type="text", text="A red square."),
            ImageContent(type="image", data=PICTURE, mimeType="image/png"),
        ]
    )


if __name__ == "__main__":
    server.run()
