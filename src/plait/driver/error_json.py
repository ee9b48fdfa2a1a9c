"""A PlaitError as the JSON object every surface answers (CONTRACT.md "Errors").

Apart from the verbs (``plait.driver.verbs`` re-exports it) so that reporting an error
imports nothing but the error itself: the CLI's output module loads it for every verb.
"""

from __future__ import annotations

from typing import Any

from plait.core.errors import PlaitError


def error_object(error: PlaitError) -> dict[str, Any]:
    """``{"error": {"code", "message", ...}}``; a load error also lists every problem."""
    body: dict[str, Any] = {"code": f"PLAIT-{error.code}", "message": error.detail}
    source = getattr(error, "source", None)
    if source is not None or len(error.problems) > 1:
        body["problems"] = [
            {"code": f"PLAIT-{p.code}", "message": p.message, "line": p.line}
            for p in error.problems
        ]
    if source is not None:
        body["file"] = source
    warnings = getattr(error, "warnings", ())
    if warnings:
        body["warnings"] = [
            {"code": f"PLAIT-{w.code}", "message": w.message, "line": w.line} for w in warnings
        ]
    return {"error": body}
