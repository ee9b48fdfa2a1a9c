"""Canonical JSON (docs/architecture.md §3.1) and the one digest function.

Every checkpoint, key and digest goes through here, so two processes that hold
the same value always produce the same bytes. Keys are sorted at every level,
separators are compact, text is UTF-8 without ASCII escaping, ints and floats
stay distinct (``1`` and ``1.0`` are different values) and NaN/Infinity are
refused in both directions.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable
from typing import Any

JSON = Any
"""A JSON value: None, bool, int, float, str, list or dict with str keys."""

WHOLE_CHECKPOINT_LIMIT = 4096
"""Checkpoint bytes up to this size are stored as they are, never cut into chunks
(``core.events``, ``store.chunks``); kept here, where both read it, so reading a store
does not import the step's events."""

_encoder = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _text_encoder() -> Callable[[Any], str]:
    """The canonical encoder, built once.

    ``JSONEncoder.encode`` builds a new C encoder at every call, which costs more than
    encoding a small value; CPython's C encoder is made once here with the same settings.
    It keeps no circular-reference markers: a circular value ends in RecursionError, which
    ``dumps`` refuses like any value nested too deeply.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return _encoder.encode
    encode = make(None, _not_json, json.encoder.encode_basestring, None, ":", ",",
                  True, False, False)  # fmt: skip

    def text(value: Any) -> str:
        return "".join(encode(value, 0))

    return text


canonical_text: Callable[[Any], str] = _text_encoder()
"""Canonical JSON text of ``value``, raising what json raises (ValueError for NaN,
TypeError for a non-JSON value, RecursionError): for callers that map errors themselves."""


class CanonicalJSONError(ValueError):
    """A value that has no canonical JSON form (NaN, Infinity, a non-JSON type)."""


def dumps(value: JSON) -> str:
    """Serialize ``value`` canonically; raises CanonicalJSONError for NaN/Inf or non-JSON."""
    try:
        return canonical_text(value)
    except (ValueError, TypeError) as exc:
        raise CanonicalJSONError(str(exc)) from exc
    except RecursionError:
        raise CanonicalJSONError("nested too deeply (or circular) to serialize") from None


def dumpb(value: JSON) -> bytes:
    """Canonical UTF-8 bytes of ``value``; a lone surrogate (text no UTF-8 can hold) is
    refused like NaN."""
    text = dumps(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalJSONError(f"text is not valid Unicode: {exc.reason}") from None


def _refuse_constant(name: str) -> Any:
    raise CanonicalJSONError(f"{name} is not valid JSON (NaN and Infinity are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999 parses as Infinity: refused like the literal
        raise CanonicalJSONError(f"{text} is out of range for a JSON number")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CanonicalJSONError(f"duplicate key {key!r} in an object")
        out[key] = value
    return out


_decoder = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_scan: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once  # type: ignore[attr-defined]
_unique_decoder = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
)


def loads(text: str | bytes, *, unique_keys: bool = False) -> JSON:
    """Parse JSON text, refusing NaN/Infinity (and numbers too large for a float, which
    would be Infinity); ints stay ints and floats stay floats. ``unique_keys`` refuses an
    object naming a key twice (text a person wrote: which value was meant is unknowable)."""
    try:
        if not isinstance(text, str):
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        elif text.startswith("\ufeff"):
            raise CanonicalJSONError("unexpected byte order mark before JSON text")
        if not unique_keys:
            # Text a plait writer made (every journal row) has no whitespace around its
            # value: scanned as it is, without ``decode``'s two whitespace matches. Anything
            # else (or nothing valid there) goes the whole way, which says what is wrong.
            try:
                value, end = _scan(text, 0)
            except (StopIteration, json.JSONDecodeError):
                end = -1
            if end == len(text):
                return value
        return (_unique_decoder if unique_keys else _decoder).decode(text)
    except json.JSONDecodeError as exc:
        raise CanonicalJSONError(str(exc)) from exc
    except CanonicalJSONError:
        raise
    except ValueError:  # an int with more digits than Python converts
        limit = sys.get_int_max_str_digits()
        raise CanonicalJSONError(f"a number has more than {limit} digits") from None
    except RecursionError:
        raise CanonicalJSONError("nested too deeply to parse") from None


def digest(data: bytes | str) -> str:
    """Lowercase hex SHA-256: the only digest plait uses."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def value_digest(value: JSON) -> str:
    """SHA-256 of a value's canonical bytes."""
    return digest(dumpb(value))


def require_json(value: Any, where: str = "value") -> None:
    """Raise CanonicalJSONError naming the first place ``value`` is not JSON plait can
    store: a key that is not a string, NaN or Infinity, text no UTF-8 can hold, or a
    type JSON does not have. ``dumps`` alone would turn an int key into a string."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, v = stack.pop()
        if v is None or isinstance(v, bool | int):
            continue
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise CanonicalJSONError(
                    f"{path}: text is not valid Unicode: {exc.reason}"
                ) from None
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise CanonicalJSONError(
                    f"{path}: {v} is not valid JSON (NaN and Infinity are refused)"
                )
        elif isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    raise CanonicalJSONError(f"{path}: key {k!r} is not a string")
                stack.append((f"{path}.{k}" if k.isidentifier() else f"{path}[{k!r}]", item))
        elif isinstance(v, list | tuple):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(v))
        else:
            raise CanonicalJSONError(f"{path}: {type(v).__name__} is not a JSON type")


def strict_equal(a: JSON, b: JSON) -> bool:
    """JSON equality where ``1 != 1.0``, ``True != 1`` and ``"1" != 1``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
