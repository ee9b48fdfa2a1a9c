"""A checkpoint at rest, stored deflated: what a parked run keeps is a few hundred bytes.

A run that parks (waiting for a person) may stay parked for days, by the
thousands; the checkpoint it parked with is most of what it stores, and a kept-whole
checkpoint over a thousand bytes also spills into an overflow page of SQLite's journal
table (a 4 KB page for a few hundred bytes). The checkpoint of the commit that parks a
run is therefore stored as ``{"z": "<base64>"}``: its canonical bytes deflated (raw
DEFLATE, RFC 1951) against ``DICTIONARY``, the skeleton every checkpoint shares (its
keys and usual values), so even a small one shrinks to a quarter or less.

Only the storage changes: a read inflates the payload back to the exact canonical bytes,
checked against the size and SHA-256 the row records as any checkpoint's are (§5.3).
Checkpoints of a run in motion are not packed: deflating costs tens of microseconds a
superstep that the durable loop would pay for bytes nobody keeps long.

``DICTIONARY`` must never change: the tag ``"z"`` names it. Another dictionary would
need another tag, and readers of both.
"""

from __future__ import annotations

import base64
import binascii
import zlib

PACKED_PREFIX = '{"z":"'
"""How a packed checkpoint's payload starts; it ends with ``"}``."""

DICTIONARY = (
    b'{"decisions":{"clock_close_ms":0,"clock_open_ms":0,"dispatched":[[0,1]],'
    b'"edges":[[0,0,"Fired"]],"superstep":1},"scheduler":{"abstract_flows":{},'
    b'"announced_asks":[],"attempt":[1,0,0],"attempt_base":[0,0,0],"cancel":null,'
    b'"clock_ms":0,"context":{},"edge_fired":[1,0],"elapsed_ms":0,"exhausted":null,'
    b'"failed":null,"in_res":[{},{"0":"Fired"},{}],"node_gen":[0,0,0],'
    b'"node_state":["DoneOk","Ready","Waiting","AwaitingClient","Running"],'
    b'"paused_at":null,"pending_asks":{"":{"ask":{"approval":true,"ask_id":"",'
    b'"expires_at":null,"input":{},"node":"","prompt":"","tool_name":null},'
    b'"key":{"attempt":1,"effect_seq":0,"kind":"tool","node":"","run_id":"",'
    b'"task_path":""},"node":1}},"phase":{"Open":{"outstanding":[{"attempt":1,'
    b'"effect_seq":0,"kind":"tool","node":"","run_id":"","task_path":""}],'
    b'"record":{"clock_close_ms":0,"clock_open_ms":0,"dispatched":[[1,1]],"edges":[],'
    b'"superstep":2},"results":{}}},"phase":"Idle","run_id":"","spent":{"input_tokens":0,'
    b'"output_tokens":0,"storage_bytes":0,"supersteps":1,"usd_micros":0,"wall_ms":0},'
    b'"superstep":1,"wall_open":null}}'
)
"""The preset dictionary of every packed checkpoint (RFC 1950, section 2.2): never edit it."""

_WBITS = -11
"""Raw DEFLATE with a 2 KB window: it holds the dictionary, and a small window keeps
setting up the compressor cheap."""
_MEM_LEVEL = 4


def pack(data: bytes) -> str:
    """The payload of a packed checkpoint whose canonical bytes are ``data``."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY,
                                  DICTIONARY)  # fmt: skip
    deflated = compressor.compress(data) + compressor.flush()
    return PACKED_PREFIX + base64.b64encode(deflated).decode("ascii") + '"}'


def unpack(payload: str) -> bytes:
    """The bytes a packed payload holds; ValueError when it is not one ``pack`` writes
    (the caller checks them against the row's size and SHA-256)."""
    if not (payload.startswith(PACKED_PREFIX) and payload.endswith('"}')):
        raise ValueError("not a packed checkpoint")
    try:
        deflated = base64.b64decode(payload[len(PACKED_PREFIX) : -2], validate=True)
        inflater = zlib.decompressobj(_WBITS, DICTIONARY)
        data = inflater.decompress(deflated) + inflater.flush()
    except (binascii.Error, zlib.error) as exc:
        raise ValueError(f"packed checkpoint does not inflate: {exc}") from exc
    if not inflater.eof or inflater.unused_data:
        raise ValueError("packed checkpoint is truncated or has trailing bytes")
    return data
