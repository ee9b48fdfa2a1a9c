"""Decision backends (docs/decide.md): what answers the core's ``decide`` questions.

``backend_from_spec`` turns a pinned ``llm.decide.backend`` into a backend: ``local`` (a
sentence-embedding model run on onnxruntime, the ``plait[decide]`` extra),
``scripted:FILE`` (fixed answers, for tests) or a model spec (the provider asked a
constrained question). A backend that cannot be built here is PLAIT-E037.
"""

from plait.decide.backends import (
    Backend,
    backend_from_spec,
    check_backend,
    tool_text,
)
from plait.decide.calibration import read_calibration

__all__ = ["Backend", "backend_from_spec", "check_backend", "read_calibration", "tool_text"]
