"""Content-addressed JSON trees: why stored bytes per superstep do not grow (§5.3).

A checkpoint is logically the whole canonical state, written every superstep. Stored
naively that is O(N^2) bytes for a run whose context grows by a little each step. Here a
JSON value is cut into *nodes* named by the SHA-256 of their bytes, so a node that did
not change since the last superstep (or that another run, an intent input or a result
already holds) has the same name and is stored once.

Theory of operation. A value is written in an *encoded form* (``E``), itself JSON:

- ``null``, booleans, numbers and strings stand for themselves;
- ``{"o": {key: E, ...}}`` is an object, ``{"l": [E, ...]}`` a list;
- ``{"t": [hash, ...]}`` is a long list: the concatenation of the lists those nodes hold;
- ``{"r": hash}`` stands for whatever the node ``hash`` holds;
- ``{"j": value}`` is a small container written as its plain canonical JSON: the fast
  path, so a small state is encoded by the C JSON encoder instead of walked in Python.

Every container is a one-key tagged object, so a user's ``{"r": "..."}`` (an ``"o"``) can
never be mistaken for a reference, and a user's list never for a tree. A node's bytes are
the canonical text of an encoded form that is not a reference. The rules that keep the
bytes per step flat:

1. an encoded form shorter than ``inline_limit`` characters stays inline in its parent;
   a longer one becomes a node and its parent holds ``{"r": hash}``;
2. a list longer than ``page_size`` is cut at FIXED index boundaries into pages of
   ``page_size`` elements (always nodes), and the page hashes are grouped the same way,
   level after level, until one level fits in a ``{"t"}``. Appending an element leaves
   every full page and every full group unchanged, so it writes the new element, the last
   page and the last group of each level: O(log N) small nodes.

The cut is a pure function of the value, so equal values always give equal nodes, in any
process. This module never touches a database, a file or the clock. ``encode`` and
``decode`` are pure apart from two caches that only save work: ``HashMemo`` (hashes of
large strings and of pages of strings, so an unchanged document is not re-hashed every
superstep, and the head of a long list of strings, so a list that grows at its end is not
looked at page by page every superstep) and ``decode``'s cache of parsed nodes. What is
already stored is the caller's knowledge (``known``), never this module's.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable, Container, Hashable, Sequence
from hashlib import sha256
from typing import Any, NamedTuple, Protocol

from plait.core.canonical import (
    JSON,
    WHOLE_CHECKPOINT_LIMIT,
    CanonicalJSONError,
    canonical_text,
    loads,
)
from plait.core.merkle import ChunkError as ChunkError
from plait.core.merkle import (
    DecodedTexts,
    Heads,
    float_text,
    keep_head,
    known_head,
    maybe_small,
    tree_text,
)
from plait.core.merkle import decode as decode
from plait.core.transcript import Entry

INLINE_LIMIT = 256
"""Encoded forms of at least this many characters are stored as nodes of their own."""

PAGE_SIZE = 16
"""Elements per list page, and hashes per tree node above the pages."""

_quote: Callable[[str], str] = json.encoder.encode_basestring  # canonical: no ASCII escapes


class Encoded(NamedTuple):
    """``root`` is the encoded form to keep; ``nodes`` the node bytes it needs, by hash."""

    root: JSON
    nodes: dict[str, bytes]


class HashMemo:
    """Remembers the node hashes of immutable values: large strings and pages of strings.

    A cache of a pure function (value -> hash), so it may serve any number of stores and
    never decides what is stored (``known`` does). Unchanged documents and full list pages
    are then not re-serialized nor re-hashed every superstep. Bounded: forgotten wholesale
    past ``max_weight`` (characters of strings held, 64 per page element).
    """

    def __init__(self, max_weight: int = 1 << 25) -> None:
        self.hashes: dict[Hashable, str] = {}
        # Immutable containers (transcript entries) by identity: the object is kept so
        # its id cannot be reused; the nodes it needed ride along in case a commit failed.
        self.frozen: dict[Any, tuple[Any, str, dict[str, bytes]]] = {}
        # Heads of long lists of strings (``merkle.known_head``), by the cut's limits.
        self.heads: dict[tuple[int, int], Heads] = {}
        self._weight = 0
        self._max_weight = max_weight

    def put(self, key: Hashable, digest: str, weight: int) -> None:
        self.weigh(weight)
        self.hashes[key] = digest

    def put_frozen(self, key: Any, entry: tuple[Any, str, dict[str, bytes]], weight: int) -> None:
        self.weigh(weight)
        self.frozen[key] = entry

    def weigh(self, weight: int) -> None:
        """Count ``weight`` more kept; past the bound, forget everything first."""
        if self._weight + weight > self._max_weight:
            self.hashes.clear()
            self.frozen.clear()
            self.heads.clear()
            self._weight = 0
        self._weight += weight

    def __len__(self) -> int:
        return len(self.hashes)


def encode(
    value: JSON,
    *,
    known: Container[str] = frozenset(),
    memo: HashMemo | None = None,
    inline_limit: int = INLINE_LIMIT,
    page_size: int = PAGE_SIZE,
) -> Encoded:
    """Cut ``value`` into nodes; nodes whose hash is in ``known`` are left out of the result.

    Raises CanonicalJSONError for a value with no canonical form (NaN, a non-str key, a
    non-JSON type).
    """
    if page_size < 2:
        raise ValueError("page_size must be at least 2")
    cutter = _Cutter(known, memo, inline_limit, page_size)
    root = cutter.value(value)
    return Encoded(loads(root), cutter.nodes)


SMALL_LIMIT = WHOLE_CHECKPOINT_LIMIT
"""A whole value whose canonical text is at most this long is stored as one ``{"j"}`` form
(the core copies a checkpoint's value for the store only when it is longer)."""


WHOLE_PREFIX = '{"j":'
"""How the row payload of a value kept whole starts (it ends with ``}``)."""

_CONTAINERS = (dict, list)


def whole_text(text: str) -> str:
    """The row payload of a value kept whole: its canonical text wrapped as ``{"j"}``."""
    return WHOLE_PREFIX + text + "}"


def kept_whole(payload: str) -> str | None:
    """The inverse of ``whole_text``: the value's text when ``payload`` keeps it whole,
    else None (a value cut into nodes)."""
    if payload.startswith(WHOLE_PREFIX) and payload.endswith("}"):
        return payload[len(WHOLE_PREFIX) : -1]
    return None


def keeps_whole(payload: str) -> bool:
    """Whether ``kept_whole(payload)`` is a text, without slicing the text out (a reader
    that only sorts the rows)."""
    # Slices and indexing, not ``startswith``/``endswith``: a method call costs more.
    return payload[:_WHOLE_PREFIX_LENGTH] == WHOLE_PREFIX and payload[-1] == "}"


_WHOLE_PREFIX_LENGTH = len(WHOLE_PREFIX)

WholeShape = tuple[str, str, int, int, int]
"""``whole_shape``'s answer: what a payload starts and ends with, where the part between
starts and stops, and the shortest such payload."""


def whole_shape(head: str, tail: str) -> WholeShape:
    """The shape of a payload keeping whole a text that starts with ``head`` and ends with
    ``tail``, for ``kept_whole_part``: the prefix and suffix wrapped once, not per row.
    ``head`` and ``tail`` must not be able to overlap in a text (no suffix of ``head`` is a
    prefix of ``tail``), so a text holding both holds them apart."""
    prefix, suffix = WHOLE_PREFIX + head, tail + "}"
    return prefix, suffix, len(prefix), -len(suffix), len(prefix) + len(suffix)


def kept_whole_part(payload: str, shape: WholeShape) -> str | None:
    """``kept_whole(payload)`` between its ``head`` and ``tail`` (``whole_shape``) when it
    starts and ends with them, else None: one test of each end and one slice where taking
    the text out and then the part would be two of each."""
    prefix, suffix, start, stop, shortest = shape
    if len(payload) >= shortest and payload.startswith(prefix) and payload.endswith(suffix):
        return payload[start:stop]
    return None


def encode_text(
    value: JSON,
    *,
    known: Container[str] = frozenset(),
    memo: HashMemo | None = None,
    text: str | None = None,
) -> tuple[str, dict[str, bytes]]:
    """Like ``encode`` but returns the root's canonical text (what a store row holds).

    The fast path: a small value (``text``, its canonical JSON, if the caller has it) is
    kept whole, written by the C encoder instead of walked. Values reaching a store are
    JSON data already; a dict with non-string keys has no canonical form and only the
    walk can tell (json would turn the keys into strings).
    """
    if text is None and type(value) is dict and _flat_and_short(value):
        try:
            text = canonical_text(value)  # the walks below could only say "small"
        except (ValueError, TypeError, RecursionError):
            text = None  # the walk reports what is wrong
        else:
            if len(text) <= SMALL_LIMIT:
                return WHOLE_PREFIX + text + "}", {}  # whole_text, without its call
            text = None  # long keys: decided below as any other value
    if (
        text is None
        and type(value) in (dict, list)
        and maybe_small(value, SMALL_LIMIT)  # a large value is neither walked nor serialized
        and _few_leaves(value, SMALL_LIMIT // 8)
    ):
        try:
            text = canonical_text(value)
        except (ValueError, TypeError, RecursionError):
            text = None  # the walk reports what is wrong
    if text is not None and len(text) <= SMALL_LIMIT and type(value) in _CONTAINERS:
        return WHOLE_PREFIX + text + "}", {}
    cutter = _Cutter(known, memo, INLINE_LIMIT, PAGE_SIZE)
    return cutter.value(value), cutter.nodes


class Cut(NamedTuple):
    """A value ``encode_text`` has already cut: a store row's payload and the nodes it needs."""

    root: str
    nodes: dict[str, bytes]

    def identity(self) -> str:
        """A string standing one-to-one for the value, without serializing it again.

        A value kept whole is its canonical text; a cut one is its content address (the
        root naming its nodes' hashes), marked so it can never equal a canonical text.
        """
        if self.root.startswith('{"j":'):
            return self.root[5:-1]
        return "\x00chunks:" + self.root


class RowEncoder(Protocol):
    """(value, what the caller knows of its encoding) -> a store row's payload text.

    The caller may know the value's canonical text, or have cut it already (a ``Cut``).
    """

    def __call__(self, value: JSON, known: str | Cut | None = None, /) -> str: ...


def collecting_encoder(
    nodes: dict[str, bytes], known: Container[str], memo: HashMemo | None
) -> RowEncoder:
    """(value, its canonical text or its ``Cut`` if known) -> a store row's payload text;
    the nodes it needs (and the store lacks) go into ``nodes`` for the same transaction."""

    def cut(value: JSON, given: str | Cut | None = None, /) -> str:
        # The two cases of every wave's rows first, in a few steps each: a value the
        # driver cut already with no new nodes (an intent's input, a result), and a small
        # container whose canonical text it has (a feed; ``encode_text``'s fast path).
        if isinstance(given, Cut):
            if given.nodes:
                nodes.update((h, data) for h, data in given.nodes.items() if h not in known)
            return given.root
        if type(given) is str and len(given) <= SMALL_LIMIT and type(value) in _CONTAINERS:
            return WHOLE_PREFIX + given + "}"
        root, new = encode_text(value, known=known, memo=memo, text=given)
        if new:
            nodes.update(new)
        return root

    return cut


def decode_row(
    payload: str,
    fetch: Callable[[str], bytes],
    *,
    cache: dict[str, JSON] | None = None,
    texts: DecodedTexts | None = None,
) -> JSON:
    """``decode`` of a store row's payload text. A value kept whole (``whole_text``) is
    parsed once, straight from its canonical text, instead of parsed, serialized again
    and parsed again for fresh containers: the payload of most journal rows."""
    if payload.startswith('{"j":') and payload.endswith("}"):
        try:
            body = loads(payload[5:-1])
        except CanonicalJSONError:
            body = None  # not a whole value after all: the walk says what is wrong
        if type(body) is dict or type(body) is list:
            return body
    return decode(loads(payload), fetch, cache=cache, texts=texts)


class _Cutter:
    """One encode call: emits canonical text bottom-up and collects the nodes it cuts."""

    __slots__ = ("known", "limit", "memo", "nodes", "page")

    def __init__(self, known: Container[str], memo: HashMemo | None, limit: int, page: int) -> None:
        self.known = known
        self.memo = memo
        self.limit = limit
        self.page = page
        self.nodes: dict[str, bytes] = {}

    def value(self, v: Any) -> str:
        """The canonical text of ``v``'s encoded form (inline, or a reference)."""
        t = type(v)
        if t is str:
            return self.string(v)
        if t is Entry and self.memo is not None:
            return self.frozen(v, v, lambda: self.obj(v))
        if t is dict:
            return self.obj(v)
        if t is list or t is tuple:
            return self.array(v)
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if t is int:
            return int.__repr__(v)
        if t is float:
            return float_text(v)
        # Subclasses (str enums, IntEnum, OrderedDict) serialize as their base, like json.
        if isinstance(v, str):
            return self.string(str.__str__(v))
        if isinstance(v, int):
            return int.__repr__(v)
        if isinstance(v, float):
            return float_text(v)
        if isinstance(v, dict):
            return self.obj(v)
        raise CanonicalJSONError(f"Object of type {t.__name__} is not JSON serializable")

    def string(self, s: str) -> str:
        if len(s) + 2 < self.limit:
            text = _quote(s)
            return text if len(text) < self.limit else self.cut(text)
        memo = self.memo
        digest = memo.hashes.get(s) if memo is not None else None
        if digest is None:
            digest = self.store(_quote(s))
            if memo is not None:
                memo.put(s, digest, len(s))
        elif digest not in self.known and digest not in self.nodes:
            self.nodes[digest] = _quote(s).encode("utf-8")
        return '{"r":"' + digest + '"}'

    def plain(self, v: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> str | None:
        """``{"j": v}`` when ``v`` is small enough to stay inline, else None (walk it)."""
        if not _few_leaves(v, self.limit // 4):
            return None  # too big to stay inline anyway: do not serialize it just to see
        if not _str_keys(v):
            return None  # json would turn int keys into strings; the walk refuses them
        try:
            text = canonical_text(v)
        except (ValueError, TypeError, RecursionError):
            return None  # the walk below reports what is wrong
        return '{"j":' + text + "}" if len(text) + 6 < self.limit else None

    def obj(self, d: dict[Any, Any]) -> str:
        if len(d) < self.limit // 4:
            fast = self.plain(d)
            if fast is not None:
                return fast
        parts = []
        for k in sorted(d):  # a non-str key fails here or just below
            if type(k) is not str:
                raise CanonicalJSONError(f"keys must be str, not {type(k).__name__}")
            parts.append(_quote(k) + ":" + self.value(d[k]))
        text = '{"o":{' + ",".join(parts) + "}}"
        return text if len(text) < self.limit else self.cut(text)

    def array(self, xs: list[Any] | tuple[Any, ...]) -> str:
        page = self.page
        value = self.value
        if len(xs) <= page:
            fast = self.plain(xs) if len(xs) < self.limit // 2 else None
            if fast is not None:
                return fast
            text = '{"l":[' + ",".join([value(x) for x in xs]) + "]}"
            return text if len(text) < self.limit else self.cut(text)
        memo = self.memo
        heads = None if memo is None else memo.heads.setdefault((self.limit, page), {})
        done, level = (0, []) if heads is None else known_head(heads, xs)
        if done and not _all_known(self.known, level):
            done, level = 0, []  # a page's node must be handed out again
        level = level + [self.page_node(xs[i : i + page]) for i in range(done, len(xs), page)]
        if memo is not None and heads is not None:
            memo.weigh(keep_head(heads, xs, level, done, page))
        while len(level) > page:
            level = [self.group_node(level[i : i + page]) for i in range(0, len(level), page)]
        text = tree_text(level)
        return text if len(text) < self.limit else self.cut(text)

    def group_node(self, hashes: list[str]) -> str:
        """Store one node of page (or group) hashes; return its hash (remembered when the
        group is full: it never changes again as its list grows)."""
        memo = self.memo
        if memo is None or len(hashes) != self.page:
            return self.store(tree_text(hashes))
        key = ("t", tuple(hashes))
        digest = memo.hashes.get(key)
        if digest is None or digest not in self.known:
            digest = self.store(tree_text(hashes))
            memo.put(key, digest, 64 * len(hashes))
        return digest

    def frozen(self, key: Any, keep: Any, encode: Callable[[], str]) -> str:
        """Encode an immutable value once per process (by identity); replay its nodes."""
        memo = self.memo
        assert memo is not None
        slot = key if type(key) is tuple else id(key)
        hit = memo.frozen.get(slot)
        if hit is not None and _same(hit[0], keep):
            for digest, data in hit[2].items():
                if digest not in self.known and digest not in self.nodes:
                    self.nodes[digest] = data
            return hit[1]
        before = set(self.nodes)
        text = encode()
        made = {h: d for h, d in self.nodes.items() if h not in before}
        memo.put_frozen(slot, (keep, text, made), len(text) + 64)
        return text

    def page_node(self, items: Sequence[Any]) -> str:
        """Store one page of a long list; return its hash (remembered for pages of strings)."""
        memo = self.memo
        if memo is not None and items and type(items[0]) is str:
            # A page seen before is found without looking at its elements one by one: a
            # key holds only strings, so an equal page holds the same strings.
            try:
                digest = memo.hashes.get((self.limit, tuple(items)))
            except TypeError:  # an unhashable element: not a page of strings
                digest = None
            if digest is not None and digest in self.known:
                return digest
        if memo is not None and items and all(type(x) is Entry for x in items):
            page = tuple(items)
            return self.frozen(
                ("page", *map(id, page)),
                page,
                lambda: self.store('{"l":[' + ",".join([self.value(x) for x in page]) + "]}"),
            )
        if memo is None or set(map(type, items)) != _ONLY_STR:
            return self.store('{"l":[' + ",".join([self.value(x) for x in items]) + "]}")
        key = (self.limit, tuple(items))  # the cut of a string depends on the limit
        digest = memo.hashes.get(key)
        if digest is None or digest not in self.known:
            digest = self.store('{"l":[' + ",".join([self.string(x) for x in items]) + "]}")
            memo.put(key, digest, 64 * len(items))
        return digest

    def store(self, text: str) -> str:
        """Make ``text`` a node; return its hash."""
        data = text.encode("utf-8")
        digest = sha256(data).hexdigest()
        if digest not in self.known:
            self.nodes[digest] = data
        return digest

    def cut(self, text: str) -> str:
        """Make ``text`` a node; return the reference that stands for it."""
        return '{"r":"' + self.store(text) + '"}'


_ONLY_STR = {str}


def _all_known(known: Container[str], digests: list[str]) -> bool:
    """Whether every one of ``digests`` is in ``known`` (a set's, in one C call)."""
    if type(known) is set or type(known) is frozenset:
        return known.issuperset(digests)
    return all(digest in known for digest in digests)


def _same(a: Any, b: Any) -> bool:
    """Identity, element by element for a page (ids alone could have been reused)."""
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
    return a is b


_FLAT_KEYS = 16
_SHORT_STR = 64
_SHORT_SCALARS = frozenset({int, float, bool, type(None)})


def _flat_and_short(value: dict[Any, Any]) -> bool:
    """At most 16 entries, each a scalar or a string of at most 64 characters: a value
    ``_few_leaves`` surely passes (17 leaves, strings far below its bound), so whether it
    is kept whole is only whether its canonical text fits (``maybe_small`` is a lower
    bound of that length). Most intent inputs are such a context."""
    if len(value) > _FLAT_KEYS:
        return False
    scalars = _SHORT_SCALARS
    for v in value.values():  # a plain loop: all() over a generator costs more here
        t = type(v)
        if t is str:
            if len(v) > _SHORT_STR:
                return False
        elif t not in scalars:
            return False
    return True


def _few_leaves(v: Any, budget: int) -> bool:
    """A cheap bound: ``v`` holds at most ``budget`` values (so it may be small)."""
    stack = [v]
    while stack:
        x = stack.pop()
        budget -= 1
        if budget < 0:
            return False
        t = type(x)
        if t is dict or isinstance(x, dict):
            if len(x) > budget:
                return False
            stack.extend(x.values())
        elif t is list or t is tuple:
            if len(x) > budget:
                return False
            stack.extend(x)
        elif t is str and len(x) > 4 * budget + 64:
            return False
    return True


def _str_keys(v: Any) -> bool:
    """True if every object inside ``v`` has only string keys."""
    t = type(v)
    if t is dict:
        for k, x in v.items():
            if type(k) is not str:
                return False
            tx = type(x)
            if (tx is dict or tx is list or tx is tuple) and not _str_keys(x):
                return False
        return True
    for x in v:
        tx = type(x)
        if (tx is dict or tx is list or tx is tuple) and not _str_keys(x):
            return False
    return True
