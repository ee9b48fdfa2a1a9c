"""Response bodies in canonical JSON, the exact text ``plait VERB --json`` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse

from plait.core.canonical import dumpb
from plait.core.errors import PlaitError
from plait.driver.error_json import error_object


class CanonicalJSON(JSONResponse):
    """A JSON response rendered by plait's one canonical-JSON function."""

    def render(self, content: Any) -> bytes:
        return dumpb(content)


def error_reply(
    error: PlaitError, status: int, headers: Mapping[str, str] | None = None
) -> CanonicalJSON:
    return CanonicalJSON(error_object(error), status_code=status, headers=headers)
