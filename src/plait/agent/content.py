"""What ``Agent.run`` accepts besides a string: images and files, as pydantic-ai's are.

``Agent.run(["What is on this receipt?", BinaryContent(png, "image/png")])`` starts a
run whose input is ``{"$parts": [...]}`` (plait.core.parts): text, base64 data with its
media type, or an image URL. The bytes are checked before the run is written
(PLAIT-E032) and stored once, content-addressed, however many turns send them.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from plait.core.parts import PARTS_KEY


@dataclass(frozen=True)
class BinaryContent:
    """Bytes with their media type: an image (``image/*``) or a file (``application/pdf``)."""

    data: bytes
    media_type: str
    name: str | None = None
    """A file's name, as the provider shows it (files only)."""

    def to_part(self) -> dict[str, Any]:
        kind = "image" if self.media_type.startswith("image/") else "file"
        part = {"type": kind, "media_type": self.media_type}
        part["data"] = base64.b64encode(self.data).decode("ascii")
        if self.name is not None and kind == "file":
            part["name"] = self.name
        return part


@dataclass(frozen=True)
class ImageUrl:
    """An image the provider fetches itself (nothing is stored but the URL)."""

    url: str

    def to_part(self) -> dict[str, Any]:
        return {"type": "image", "url": self.url}


UserContent = str | BinaryContent | ImageUrl
"""One piece of a prompt: text, bytes or an image URL."""


def agent_input(prompt: str | Sequence[UserContent]) -> dict[str, Any]:
    """The run input of a prompt: ``{"prompt": text}``, or ``{"$parts": [...]}``."""
    if isinstance(prompt, str):
        return {"prompt": prompt}
    parts: list[dict[str, Any]] = []
    for piece in prompt:
        if isinstance(piece, str):
            parts.append({"type": "text", "text": piece})
        elif isinstance(piece, BinaryContent | ImageUrl):
            parts.append(piece.to_part())
        else:
            raise TypeError(f"a prompt part must be str, BinaryContent or ImageUrl, not {piece!r}")
    return {PARTS_KEY: parts}
