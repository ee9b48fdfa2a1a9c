"""One codec for the core's JSON forms, driven by each dataclass field's metadata.

Checkpoints are compared byte for byte (§5.5), so every stored form is exact: this
module is the only place that knows how a field becomes JSON and back. A field says
how in its metadata (``json_field``): under which key, through which value codec
(integer keys as decimal strings, tuples as arrays, sets as sorted arrays, enums,
nested records, tagged variants ``{"Variant": payload}``), and whether it is omitted
while at its default, so a feature a run does not use leaves its bytes alone (§3.1).

Each record has two encoders: ``encode``, the form every reader prints and checkpoints
took up to engine epoch 3, and ``encode_compact``, the form of checkpoints from epoch 4
(``COMPACT_EPOCH``), which also omits every field at a plain default (None, 0, False, an
empty string or container), in nested records too. ``decode`` reads both: a missing key
is the field's default.

Per class the field handlers are worked out once (``RecordCodec``), when the module
defining the class is imported, never per call: the durable loop encodes the state at
every superstep. Key order is left to canonical JSON, which sorts keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from plait.core.canonical import JSON

T = TypeVar("T")
Enc = Callable[[Any], JSON]
Dec = Callable[[JSON], Any]


@dataclass(frozen=True, slots=True)
class ValueCodec:
    """How one value becomes JSON and back; None means "as it is" (no call at all).

    ``skip`` names values written without calling ``enc`` (``"none"``: None, as it is;
    ``"empty"``: an empty container, as it is; ``"empty-array"``: an empty container,
    as ``[]``): a record's compiled encoder tests them inline, so the common case (no
    cancel, no pending asks, no announced asks) costs no call.
    """

    enc: Enc | None = None
    dec: Dec | None = None
    skip: str = ""
    compact: Enc | None = None
    """The compact form's encoder, where it differs from ``enc`` (a record inside)."""


class Absent(Enum):
    """A field value that is not there at all, as opposed to null."""

    ABSENT = "absent"


ABSENT = Absent.ABSENT
"""The default of a field whose key is absent unless set, even to null."""

PLAIN = ValueCodec()
"""A JSON value kept as it is, shared with the state on both sides."""

COPY_LIST = ValueCodec(None, list)
"""A list the state mutates: written as it is, read into a fresh list."""

COPY_DICT = ValueCodec(None, dict)
"""A dict the state mutates: written as it is, read into a fresh dict."""

INT = ValueCodec(None, int)

SORTED_SET = ValueCodec(sorted, set, "empty-array")
"""A set of strings: a sorted array."""


def _apply(codec: ValueCodec, side: str) -> Callable[[Any], Any]:
    fn = codec.enc if side == "enc" else codec.dec
    return fn if fn is not None else _same


def _same(value: Any) -> Any:
    return value


def optional(inner: ValueCodec) -> ValueCodec:
    """None stays null; anything else goes through ``inner``."""
    enc, dec = _apply(inner, "enc"), _apply(inner, "dec")
    compact = inner.compact
    return ValueCodec(
        None if inner.enc is None else (lambda v: None if v is None else enc(v)),
        None if inner.dec is None else (lambda v: None if v is None else dec(v)),
        "none",
        None if compact is None else (lambda v: None if v is None else compact(v)),
    )


def list_of(inner: ValueCodec) -> ValueCodec:
    """A list as an array, written as it is when its items are; read into a fresh list."""
    enc, dec = _apply(inner, "enc"), _apply(inner, "dec")
    compact = inner.compact
    return ValueCodec(
        None if inner.enc is None else (lambda v: [enc(x) for x in v]),
        list if inner.dec is None else (lambda v: [dec(x) for x in v]),
        "empty",
        None if compact is None else (lambda v: [compact(x) for x in v]),
    )


def tuple_of(*items: ValueCodec) -> ValueCodec:
    """A fixed-size tuple as an array."""
    encs = [_apply(i, "enc") for i in items]
    decs = [_apply(i, "dec") for i in items]
    return ValueCodec(
        lambda v: [e(x) for e, x in zip(encs, v, strict=True)],
        lambda v: tuple(d(x) for d, x in zip(decs, v, strict=True)),
    )


def dict_of(inner: ValueCodec) -> ValueCodec:
    """A str-keyed dict, written as it is when its values are; read into a fresh dict."""
    enc, dec = _apply(inner, "enc"), _apply(inner, "dec")
    compact = inner.compact
    return ValueCodec(
        None if inner.enc is None else (lambda v: {k: enc(x) for k, x in v.items()}),
        dict if inner.dec is None else (lambda v: {k: dec(x) for k, x in v.items()}),
        "empty",
        None if compact is None else (lambda v: {k: compact(x) for k, x in v.items()}),
    )


def int_keys(inner: ValueCodec = PLAIN) -> ValueCodec:
    """An int-keyed dict: decimal string keys (sorted as strings, like every key)."""
    enc, dec = _apply(inner, "enc"), _apply(inner, "dec")
    if inner.enc is None and inner.dec is None:
        return ValueCodec(
            lambda v: {str(k): x for k, x in v.items()},
            lambda v: {int(k): x for k, x in v.items()},
        )
    compact = inner.compact
    return ValueCodec(
        lambda v: {str(k): enc(x) for k, x in v.items()},
        lambda v: {int(k): dec(x) for k, x in v.items()},
        compact=None if compact is None else (lambda v: {str(k): compact(x) for k, x in v.items()}),
    )


def enum(cls: type[Enum]) -> ValueCodec:
    """A str enum: written as it is (its value is its JSON name), read by value."""
    by_value = {m.value: m for m in cls}
    return ValueCodec(None, by_value.__getitem__)


def nested(record: RecordCodec[Any]) -> ValueCodec:
    """A record inside another, through its own codec (compact inside a compact one)."""
    return ValueCodec(record.encode, record.decode, compact=record.encode_compact)


@dataclass(frozen=True, slots=True)
class Variant:
    """One arm of a tagged union: a bare ``"Tag"`` when ``payload`` is None (a unit
    variant), else ``{"Tag": payload}``."""

    cls: type[Any]
    tag: str
    payload: ValueCodec | None = None


def tagged(*variants: Variant) -> ValueCodec:
    """A union of records, told apart by their tag."""
    units: dict[type[Any], str] = {v.cls: v.tag for v in variants if v.payload is None}
    payloads = {v.cls: (v.tag, _apply(v.payload, "enc")) for v in variants if v.payload}
    compacts = {
        v.cls: (v.tag, v.payload.compact or _apply(v.payload, "enc")) for v in variants if v.payload
    }
    by_tag = {v.tag: v for v in variants}

    def encoder(arms: dict[type[Any], tuple[str, Enc]]) -> Enc:
        """The encoder writing each record through its arm in ``arms`` (full or compact)."""

        def encode(value: Any) -> JSON:
            unit = units.get(type(value))
            if unit is not None:
                return unit
            tag, payload = arms[type(value)]
            return {tag: payload(value)}

        return encode

    enc, compact = encoder(payloads), encoder(compacts)

    def dec(value: JSON) -> Any:
        if isinstance(value, str):
            return by_tag[value].cls()
        ((tag, body),) = value.items()
        arm = by_tag[tag]
        assert arm.payload is not None
        return _apply(arm.payload, "dec")(body)

    has_compact = any(v.payload is not None and v.payload.compact for v in variants)
    return ValueCodec(enc, dec, compact=compact if has_compact else None)


# --- records ----------------------------------------------------------------

_NO_DEFAULT: Any = dataclasses.MISSING


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """A field's JSON metadata: its key (the field name unless given), its value codec,
    and whether it is omitted while equal to its default."""

    codec: ValueCodec = PLAIN
    key: str | None = None
    omit_default: bool = False


def json_field(
    codec: ValueCodec = PLAIN,
    *,
    key: str | None = None,
    omit_default: bool = False,
    default: Any = _NO_DEFAULT,
    default_factory: Callable[[], Any] | Any = _NO_DEFAULT,
) -> Any:
    """A dataclass field carrying its JSON metadata."""
    meta = {"json": FieldSpec(codec, key, omit_default)}
    if default_factory is not _NO_DEFAULT:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True)
class _Handler:
    name: str
    key: str
    enc: Enc | None
    dec: Dec | None
    skip: str
    omit: bool
    """Omitted while equal to ``default``."""
    default: Any
    """The field's default (None when it has none: ``required``)."""
    required: bool
    compact: Enc | None
    """The compact form's value encoder, where it differs from ``enc``."""
    omit_compact: bool
    """Omitted in the compact form while equal to ``default``: ``omit``, or a plain default."""


def _default_of(f: dataclasses.Field[Any]) -> Any:
    """The value a field is omitted at: its default (a factory's fresh value)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"field {f.name} is omitted at its default but has none")


_PLAIN_DEFAULTS = (bool, int, str, list, dict, set, tuple)


def _plain_default(default: Any) -> bool:
    """A default the compact form omits: None, or a false bool, int, string or container
    (a value equal to it is exactly one that tests false, so the test is ``if x``)."""
    return default is None or (type(default) in _PLAIN_DEFAULTS and not default)


class RecordCodec(Generic[T]):
    """The encoder and decoder of one dataclass, worked out from its fields once.

    The encoder is compiled from the field handlers into one function that builds the
    object in a single expression (as ``dataclasses`` compiles ``__init__``): the state
    is encoded at every superstep, and a loop over handlers costs a quarter of a step.
    """

    __slots__ = ("cls", "encode", "encode_compact", "handlers")

    def __init__(self, cls: type[T]) -> None:
        self.cls = cls
        handlers = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            spec = f.metadata.get("json", FieldSpec())
            if not isinstance(spec, FieldSpec):
                raise TypeError(f"{cls.__name__}.{f.name}: json metadata must be a FieldSpec")
            has_default = (
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            )
            default = _default_of(f) if has_default else None
            handlers.append(
                _Handler(
                    f.name,
                    spec.key or f.name,
                    spec.codec.enc,
                    spec.codec.dec,
                    spec.codec.skip,
                    spec.omit_default,
                    default,
                    not has_default,
                    spec.codec.compact,
                    spec.omit_default or (has_default and _plain_default(default)),
                )
            )
        self.handlers = tuple(handlers)
        self.encode: Callable[[T], dict[str, JSON]] = _compile_encoder(cls, self.handlers)
        self.encode_compact: Callable[[T], dict[str, JSON]] = _compile_encoder(
            cls, tuple(_compacted(h) for h in self.handlers)
        )

    def decode(self, value: dict[str, JSON]) -> T:
        """Missing keys take the field's default (an omitted feature); a missing key of
        a field without one is a KeyError, as a malformed checkpoint should be."""
        kwargs: dict[str, Any] = {}
        for h in self.handlers:
            if h.key in value:
                raw = value[h.key]
                kwargs[h.name] = raw if h.dec is None else h.dec(raw)
            elif h.required:
                raise KeyError(h.key)
        return self.cls(**kwargs)


def _compacted(h: _Handler) -> _Handler:
    """The handler of the compact form: its compact value encoder, omitted at a plain
    default as well."""
    if not h.omit_compact and h.compact is None:
        return h
    # _PLAIN: omitted while false (0, False, "" or empty); None stays "is not None".
    default = h.default if h.omit or h.default is None else _PLAIN
    return dataclasses.replace(h, enc=h.compact or h.enc, omit=h.omit_compact, default=default)


class _Plain(Enum):
    """The default of a field the compact form omits while its value tests false."""

    PLAIN = "plain"


_PLAIN = _Plain.PLAIN


def _compile_encoder(cls: type[Any], handlers: tuple[_Handler, ...]) -> Callable[[Any], Any]:
    """``def encode(v): out = {key: enc(v.name), ...}; <omittable fields>; return out``."""
    namespace: dict[str, Any] = {}
    always: list[str] = []
    omittable: list[str] = []
    for i, h in enumerate(handlers):
        if h.enc is not None:
            namespace[f"enc{i}"] = h.enc
        if not h.omit:
            if h.enc is None:
                read = f"v.{h.name}"
            elif h.skip == "none":
                read = f"(None if (x := v.{h.name}) is None else enc{i}(x))"
            elif h.skip == "empty":
                read = f"(enc{i}(x) if (x := v.{h.name}) else x)"
            elif h.skip == "empty-array":
                read = f"(enc{i}(x) if (x := v.{h.name}) else [])"
            else:
                read = f"enc{i}(v.{h.name})"
            always.append(f"{h.key!r}: {read}")
            continue
        namespace[f"default{i}"] = h.default
        if h.default is _PLAIN:
            test = "x"
        elif h.default is None:
            test = "x is not None"
        else:
            test = f"x != default{i}"
        value = "x" if h.enc is None else f"enc{i}(x)"
        omittable.append(f"    x = v.{h.name}\n    if {test}:\n        out[{h.key!r}] = {value}\n")
    source = (
        f"def encode(v):\n    out = {{{', '.join(always)}}}\n{''.join(omittable)}    return out\n"
    )
    exec(compile(source, f"<codec of {cls.__qualname__}>", "exec"), namespace)
    encode: Callable[[Any], Any] = namespace["encode"]
    return encode
