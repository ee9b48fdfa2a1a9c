"""Which files a server may open, and which models a request may name (docs/security.md).

A workflow file and its folder are code: starting one runs its tools, and checking one
imports its folder's Python modules. A server therefore opens only the workflow files of
the folder it serves (``plait serve --workflows DIR``, default the folder it was started
in): a path is resolved — relative paths against DIR, every link followed — and must land
inside DIR on a ``.yaml``, ``.yml`` or ``.json`` name, else it is refused (PLAIT-E034,
403) without being opened, so a refusal quotes nothing of any file. A path whose name is
no path (a NUL byte, a name too long) is PLAIT-E019 (400); what the file itself holds is
judged by the loader, which reads only regular files (``plait.files``).

A model override (``"model"`` in a start) could send the server's API keys to any URL it
names (``openai-compatible:http://elsewhere/v1:m``), so it is refused (PLAIT-E035, 403)
unless it starts with a prefix ``--allow-model`` admits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from plait import files
from plait.core.errors import PlaitError

WORKFLOW_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Confinement:
    """The served folder (resolved) and the model prefixes requests may name."""

    root: Path
    allow_models: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, folder: str | os.PathLike[str] | None, allow_models: tuple[str, ...] = ()
    ) -> Confinement:
        """The confinement of ``folder`` (None: the current folder), which must be one."""
        root = files.resolved(folder if folder is not None else os.getcwd())
        if root is None or not root.is_dir():
            shown = files.shown(folder if folder is not None else os.getcwd())
            raise PlaitError("E019", f"--workflows {shown}: not a folder")
        return cls(root, tuple(allow_models))

    def workflow(self, path: str) -> Path:
        """The file ``path`` names, when the server may open it (see the module docstring)."""
        problem = files.name_problem(path)
        if problem is not None:
            raise PlaitError("E019", f"workflow '{files.shown(path)}': {problem}")
        full = files.resolved(self.root / path)
        if full is None or not full.is_relative_to(self.root):
            raise PlaitError(
                "E034",
                f"workflow '{files.shown(path)}' is outside the folder this server serves"
                " (plait serve --workflows)",
            )
        if full.suffix.lower() not in WORKFLOW_SUFFIXES:
            raise PlaitError(
                "E034",
                f"workflow '{files.shown(path)}' is not a workflow file"
                f" ({', '.join(WORKFLOW_SUFFIXES)})",
            )
        return full

    def model(self, spec: str | None) -> str | None:
        """``spec`` when a request may name it (None: no override)."""
        if spec is None or any(spec.startswith(prefix) for prefix in self.allow_models):
            return spec
        admitted = ", ".join(repr(p) for p in self.allow_models) or "none"
        raise PlaitError(
            "E035",
            f"model override '{spec}' refused: this server admits overrides starting with"
            f" {admitted} (plait serve --allow-model PREFIX)",
        )
