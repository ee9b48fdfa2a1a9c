"""Content parts (plait.core.parts) as each provider's message parts.

A user entry's parts go out as OpenAI chat parts (``text``, ``image_url`` with a data URL
or the image's URL, ``file`` with a data URL) or as Anthropic content blocks (``text``,
``image`` and ``document`` with a base64 or URL source). Adapters call these when they
build a request; nothing here is journaled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plait.core.parts import is_parts

__all__ = ["anthropic_part", "images_message", "is_parts", "openai_part", "tool_text"]


def _data_url(part: Mapping[str, Any]) -> str:
    return f"data:{part['media_type']};base64,{part['data']}"


def openai_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """One part as an OpenAI chat content part."""
    kind = part["type"]
    if kind == "text":
        return {"type": "text", "text": part["text"]}
    if kind == "image":
        url = part["url"] if "url" in part else _data_url(part)
        return {"type": "image_url", "image_url": {"url": url}}
    name = part.get("name") or "file." + str(part["media_type"]).rsplit("/", 1)[-1]
    return {"type": "file", "file": {"filename": name, "file_data": _data_url(part)}}


def anthropic_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """One part as an Anthropic content block."""
    kind = part["type"]
    if kind == "text":
        return {"type": "text", "text": part["text"]}
    if "url" in part:
        return {"type": "image", "source": {"type": "url", "url": part["url"]}}
    source = {"type": "base64", "media_type": part["media_type"], "data": part["data"]}
    if kind == "image":
        return {"type": "image", "source": source}
    block: dict[str, Any] = {"type": "document", "source": source}
    if part.get("name"):
        block["title"] = part["name"]
    return block


def tool_text(parts: list[dict[str, Any]]) -> str:
    """A tool result's text parts, and where its images went."""
    texts = [p["text"] for p in parts if p["type"] == "text"]
    return "\n".join([*texts, "(the images this tool returned follow in the next message)"])


def images_message(call_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The user message that shows the model the images of a tool result."""
    shown = [openai_part(p) for p in parts if p["type"] != "text"]
    intro = {"type": "text", "text": f"The images returned by tool call {call_id}:"}
    return {"role": "user", "content": [intro, *shown]}
