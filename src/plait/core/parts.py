"""Content parts: text, images and files in a user message, as the journal holds them.

A run's input may carry ``{"$parts": [part, ...]}`` (docs/llm-nodes.md "Content
parts"); engine epoch 2 sends them as the user message's parts:

- ``{"type": "text", "text": "..."}``
- ``{"type": "image", "media_type": "image/png", "data": "<base64>"}``
- ``{"type": "file", "media_type": "application/pdf", "data": "<base64>", "name": "..."}``
  (``name`` optional)
- ``{"type": "image", "url": "https://..."}``: an image the provider fetches itself.

The base64 text is one long JSON string, so the store keeps it as ONE content-addressed
node (store/chunks.py): every checkpoint, intent and manifest that holds the part names
that node by its hash, the bytes are written once. Which media types and how many bytes
are accepted is checked before a run starts (driver/parts_check.py, PLAIT-E032). Pure.
"""

from __future__ import annotations

from typing import Any

PARTS_KEY = "$parts"
"""The reserved input key that holds a user message's content parts."""

IMAGE_TYPES = ("image/gif", "image/jpeg", "image/png", "image/webp")
"""Media types of image parts: those both OpenAI and Anthropic accept."""
FILE_TYPES = ("application/pdf",)
"""Media types of file parts: those both OpenAI and Anthropic accept."""

_SHAPES = {
    "text": ({"type", "text"}, frozenset()),
    "image": ({"type", "media_type", "data"}, frozenset()),
    "file": ({"type", "media_type", "data"}, frozenset({"name"})),
}


def is_part(value: Any) -> bool:
    """Whether ``value`` has the shape of a content part (not whether it is accepted)."""
    if not isinstance(value, dict):
        return False
    kind = value.get("type")
    if kind == "image" and set(value) == {"type", "url"}:
        return isinstance(value["url"], str)
    shape = _SHAPES.get(kind) if isinstance(kind, str) else None
    if shape is None:
        return False
    required, optional = shape
    keys = set(value)
    if not required <= keys or not keys <= required | optional:
        return False
    return all(isinstance(value[k], str) for k in keys)


def is_parts(content: Any) -> bool:
    """Whether a user entry's content is a list of content parts (else text or JSON)."""
    return isinstance(content, list) and bool(content) and all(is_part(p) for p in content)


def result_parts(content: Any) -> list[dict[str, Any]] | None:
    """The content parts of a tool result ``{"content": [part, ...]}`` holding an image
    (an MCP tool's, tools/mcp.py), else None: such a result reaches the model as parts."""
    if not isinstance(content, dict) or set(content) != {"content"}:
        return None
    parts = content["content"]
    if not isinstance(parts, list) or not is_parts(parts):
        return None
    return parts if any(p["type"] != "text" for p in parts) else None
