"""The HTTP API and the web console (``plait serve``, docs/architecture.md §12).

The same verbs as the CLI, answering with the same JSON objects (``plait.driver.verbs``),
behind a bearer token; a server-sent event stream per run; one static console page.
The server only reads and journals through ``Runtime``, like any other surface: it
owns no state of its own, so it can stop at any instant and nothing is lost.

FastAPI is an optional dependency (``pip install 'plait[server]'``): nothing here
imports it until ``create_app`` is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plait.server.app import create_app

from plait.server.limits import DEFAULT_MAX_BODY_BYTES


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from plait.server.app import create_app

        return create_app
    raise AttributeError(f"module 'plait.server' has no attribute {name!r}")


__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app"]
