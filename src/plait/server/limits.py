"""The server's limits, importable without FastAPI (``plait serve`` names them first)."""

DEFAULT_MAX_BODY_BYTES = 16 << 20
"""The largest request body a server reads (16 MiB): a run input, an answer, a message."""
