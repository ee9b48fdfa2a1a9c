"""A run's original manifest as stored: what every run of a workflow shares, stored once.

A manifest pins the workflow, its tools' schemas and the digests of their files: about
1.4 KB that are the same for every run of one workflow version, next to a few fields of
the run's own (its id, input, principal). The shared fields are written as nodes of
their own (content-addressed, ``INSERT OR IGNORE``/``ON CONFLICT DO NOTHING``), so the
thousandth run of a workflow stores only its own fields and two or three references.

The row is an ordinary encoded form of ``chunks.py`` (``{"o": {...}}`` holding
``{"r": hash}`` references), so it is read by the same decoder as every other row, by
this version and by older ones, and a manifest stored whole before (``{"j": ...}``) still
reads as it is. The logical manifest (its canonical text) does not change.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable, Container
from hashlib import sha256

from plait.core.canonical import JSON
from plait.store.chunks import RowEncoder

SHARED_FIELDS = frozenset({"workflow", "tool_schemas", "mcp_catalogue"})
"""Top-level manifest fields that runs of one workflow version have in common.
``tool_sources`` is too, but it is small and made of SHA-256 digests, which PostgreSQL's
node reader would take for node names and look up one level further (a round trip)."""

SHARED_MIN_CHARS = 64
"""A shared field kept whole shorter than this stays inline: a reference is ~72 chars."""

_quote: Callable[[str], str] = json.encoder.encode_basestring


def manifest_payload(
    manifest: JSON, encode: RowEncoder, nodes: dict[str, bytes], known: Container[str]
) -> str:
    """The manifests row's payload: each field encoded by ``encode`` (the store's row
    encoder, which puts the nodes it cuts into ``nodes``), a shared field kept whole made
    a node of its own (added to ``nodes`` unless ``known``). Not a dict: ``encode`` whole."""
    if type(manifest) is not dict or not all(type(key) is str for key in manifest):
        return encode(manifest)
    parts = []
    for key in sorted(manifest):
        root = encode(manifest[key])
        if key in SHARED_FIELDS and root.startswith('{"j":') and len(root) >= SHARED_MIN_CHARS:
            root = _reference(root, nodes, known)
        parts.append(_quote(key) + ":" + root)
    return '{"o":{' + ",".join(parts) + "}}"


def _reference(root: str, nodes: dict[str, bytes], known: Container[str]) -> str:
    """``root`` (an encoded form that is not a reference) as a node, and its reference."""
    data = root.encode("utf-8")
    digest = sha256(data).hexdigest()
    if digest not in known:
        nodes[digest] = data
    return '{"r":"' + digest + '"}'
