"""A package's public names, each imported from its module on first use.

``plait`` and ``plait.workflow`` name their public API in one table instead of importing
it, so importing the package (which every submodule import does first) costs nothing:
the ``plait`` command and a worker import only what they run (docs/benchmarks.md "CLI
start").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_getattr(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__``: ``homes`` maps each public name to the module defining it;
    the value is kept in ``namespace`` (the package's globals) after its first use."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        namespace[name] = value
        return value

    return __getattr__
