"""Checkpoints of engine epoch 3: cut into content-addressed nodes, digest = Merkle root.

Until epoch 2 a checkpoint's digest was the SHA-256 of its whole canonical bytes, so every
superstep serialized and hashed the whole state: O(state) per step for a context that
grows (issue #22). From epoch 3 the checkpoint is cut here, when it is taken, into the
nodes ``store.chunks`` stores (same encoded forms: ``j``, ``o``, ``l``, ``t``, ``r``), and
its digest is the SHA-256 of the root's encoded text, which names its nodes by their
hashes: a Merkle root. A reader checks the root against the digest and each node against
its name, so the whole value is still covered (§5.3).

The cut is a pure function of the value (the digest is reproducible from the journal by
any process); a ``ChunkMemo`` only saves work: a long string, a full page of strings or of
transcript entries and a full group of pages are encoded and hashed once per memo (and a
long list of strings that grows at its end has its full pages found in one comparison of
its head, ``known_head``, not one lookup per page), and
their canonical byte sizes kept with their hashes, so the checkpoint's size (the E015
bound, the row's ``size``) is known without building its bytes. A memo entry means "its
nodes were handed out in an earlier cut of this memo": the owner (the durable journal)
clears the memo if those nodes may not have reached the store.
"""

from __future__ import annotations

import json.encoder
import math
from collections.abc import Callable, Mapping
from hashlib import sha256
from typing import Any, NamedTuple, Protocol

from plait.core.canonical import (
    JSON,
    WHOLE_CHECKPOINT_LIMIT,
    CanonicalJSONError,
    canonical_text,
    dumpb,
    loads,
)
from plait.core.transcript import Entry

MERKLE_EPOCH = 3
"""The first engine epoch whose checkpoints are cut here, digested by their Merkle root."""

INLINE_LIMIT = 256
"""Encoded forms of at least this many characters are nodes of their own (as chunks.py)."""

PAGE_SIZE = 16
"""Elements per list page, and hashes per tree node above the pages (as chunks.py)."""

_new_tuple = tuple.__new__
_quote: Callable[[str], str] = json.encoder.encode_basestring  # canonical: no ASCII escapes


class ChunkError(ValueError):
    """A node or encoded form that is not what a cutter writes (corruption)."""


class CheckpointCut(NamedTuple):
    """One checkpoint as stored: the root's encoded text (the row's payload), the nodes
    this cut handed out (by hash), the Merkle digest and the canonical byte size. (A
    named tuple: made at every superstep, where a frozen dataclass costs more to build.)"""

    root: str
    nodes: dict[str, bytes]
    digest: str
    size: int

    def canonical(self, more: Mapping[str, bytes] | None = None) -> bytes:
        """The checkpoint's canonical bytes, rebuilt from the nodes (``more``: those an
        earlier cut of the same memo handed out)."""
        nodes = self.nodes if not more else {**more, **self.nodes}
        return dumpb(decode(loads(self.root), nodes.__getitem__))


class ChunkMemo:
    """Hashes and canonical sizes of immutable subtrees a cutter has handed out.

    A cache of a pure function, bounded: forgotten wholesale past ``max_weight`` (about
    the characters it keeps alive), which only costs cutting those subtrees again.
    ``hashed`` counts the bytes fed to SHA-256, for tests of how the work grows.
    """

    def __init__(self, max_weight: int = 1 << 25) -> None:
        self.strings: dict[str, tuple[str, int]] = {}
        self.pages: dict[tuple[Any, ...], tuple[Any, str, int]] = {}
        self.groups: dict[tuple[str, ...], str] = {}
        self.heads: Heads = {}
        self.hashed = 0
        self.small = False
        """Whether the last checkpoint cut was kept whole (a hint: see ``cut_checkpoint``)."""
        self._weight = 0
        self._max_weight = max_weight

    def clear(self) -> None:
        self.strings.clear()
        self.pages.clear()
        self.groups.clear()
        self.heads.clear()
        self._weight = 0

    def weigh(self, weight: int) -> None:
        self._weight += weight
        if self._weight > self._max_weight:
            self.clear()


def cut_checkpoint(value: dict[str, Any], memo: ChunkMemo | None = None) -> CheckpointCut:
    """Cut a checkpoint's value (``{"scheduler": ..., "decisions": ...}``) into nodes.

    A small value (canonical text of at most WHOLE_CHECKPOINT_LIMIT bytes) is kept whole,
    as ``{"j": text}``; a larger one is walked. Raises CanonicalJSONError for a value with
    no canonical form.
    """
    text: str | None = None
    # The last checkpoint was small: so is this one, most likely, and its text costs less
    # than the walk that would tell (the choice is the same either way: see maybe_small).
    if (memo is not None and memo.small) or maybe_small(value, WHOLE_CHECKPOINT_LIMIT):
        try:
            text = canonical_text(value)
        except (ValueError, TypeError, RecursionError):
            text = None  # the walk reports what is wrong
    if text is not None and len(text) <= WHOLE_CHECKPOINT_LIMIT:
        root = '{"j":' + text + "}"
        data = root.encode("utf-8")
        if memo is not None:
            memo.small = True
            memo.hashed += len(data)
        # CheckpointCut(...) without its Python __new__ (a frame that does only this)
        return _new_tuple(CheckpointCut, (root, {}, sha256(data).hexdigest(), len(data) - 6))
    cutter = _Cutter(memo)
    root, size = cutter.value(value)
    data = root.encode("utf-8")
    cutter.hashed += len(data)
    if memo is not None:
        memo.small = False
        memo.hashed += cutter.hashed
    return CheckpointCut(root, cutter.nodes, sha256(data).hexdigest(), size)


def merkle_digest(payload: str) -> str:
    """The epoch-3 digest of a checkpoint row whose payload (root text) is ``payload``."""
    return sha256(payload.encode("utf-8")).hexdigest()


def _size(text: str) -> int:
    """UTF-8 length of ``text``."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def maybe_small(v: Any, limit: int) -> bool:
    """False when ``v``'s canonical text surely has more than ``limit`` characters: a walk
    summing a lower bound of the text's length (quotes, brackets, separators, one character
    a scalar), which gives up as soon as the bound passes ``limit``, so a large state is
    not serialized just to learn it is large. A true lower bound: the whole-or-cut choice
    is ``len(canonical text) <= limit`` however it is reached."""
    stack = [v]
    total = 0
    while stack:
        x = stack.pop()
        t = type(x)
        if t is str:
            total += len(x) + 2
        elif t is dict or isinstance(x, dict):
            total += 1 + 4 * len(x) if x else 2
            stack.extend(x.values())
        elif t is list or t is tuple:
            total += 1 + len(x) if x else 2
            stack.extend(x)
        else:
            total += 1
        if total > limit:
            return False
    return True


class _Cutter:
    """One cut: (encoded text, canonical size) bottom-up; collects the nodes it hands out."""

    __slots__ = ("hashed", "memo", "nodes")

    def __init__(self, memo: ChunkMemo | None) -> None:
        self.memo = memo
        self.nodes: dict[str, bytes] = {}
        self.hashed = 0

    def value(self, v: Any) -> tuple[str, int]:
        t = type(v)
        if t is str:
            return self.string(v)
        if t is dict or t is Entry:
            return self.obj(v)
        if t is list or t is tuple:
            return self.array(v)
        if v is None:
            return "null", 4
        if v is True:
            return "true", 4
        if v is False:
            return "false", 5
        if t is int:
            text = int.__repr__(v)
            return text, len(text)
        if t is float:
            text = float_text(v)
            return text, len(text)
        if isinstance(v, str):  # subclasses serialize as their base, like json
            return self.string(str.__str__(v))
        if isinstance(v, int):
            text = int.__repr__(v)
            return text, len(text)
        if isinstance(v, float):
            text = float_text(v)
            return text, len(text)
        if isinstance(v, dict):
            return self.obj(v)
        raise CanonicalJSONError(f"Object of type {t.__name__} is not JSON serializable")

    def string(self, s: str) -> tuple[str, int]:
        if len(s) + 2 < INLINE_LIMIT:
            text = _quote(s)
            size = _size(text)
            return (text, size) if len(text) < INLINE_LIMIT else (self.cut(text), size)
        memo = self.memo
        hit = memo.strings.get(s) if memo is not None else None
        if hit is None:
            text = _quote(s)
            digest = self.store(text)
            hit = (digest, _size(text))
            if memo is not None:
                memo.strings[s] = hit
                memo.weigh(len(s))
        return '{"r":"' + hit[0] + '"}', hit[1]

    def plain(self, v: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> tuple[str, int] | None:
        """``{"j": v}`` when ``v`` is small enough to stay inline, else None (walk it)."""
        if not maybe_small(v, INLINE_LIMIT) or not _str_keys(v):
            return None  # json would turn int keys into strings; the walk refuses them
        try:
            text = canonical_text(v)
        except (ValueError, TypeError, RecursionError):
            return None  # the walk below reports what is wrong
        if len(text) + 6 >= INLINE_LIMIT:
            return None
        return '{"j":' + text + "}", _size(text)

    def obj(self, d: dict[Any, Any]) -> tuple[str, int]:
        if len(d) < INLINE_LIMIT // 4:
            fast = self.plain(d)
            if fast is not None:
                return fast
        parts = []
        size = 1 + len(d)  # braces and the commas between members
        for k in sorted(d):  # a non-str key fails here or just below
            if type(k) is not str:
                raise CanonicalJSONError(f"keys must be str, not {type(k).__name__}")
            key = _quote(k)
            text, n = self.value(d[k])
            parts.append(key + ":" + text)
            size += _size(key) + 1 + n
        text = '{"o":{' + ",".join(parts) + "}}"
        return (text, size) if len(text) < INLINE_LIMIT else (self.cut(text), size)

    def array(self, xs: list[Any] | tuple[Any, ...]) -> tuple[str, int]:
        n = len(xs)
        if n <= PAGE_SIZE:
            fast = self.plain(xs)
            if fast is not None:
                return fast
            content, texts = self.items(xs)
            text = '{"l":[' + ",".join(texts) + "]}"
            size = 1 + content + max(n, 1)
            return (text, size) if len(text) < INLINE_LIMIT else (self.cut(text), size)
        memo = self.memo
        done, level = (0, []) if memo is None else known_head(memo.heads, xs)
        level = level + [self.page(xs[i : i + PAGE_SIZE]) for i in range(done, n, PAGE_SIZE)]
        if memo is not None:
            memo.weigh(keep_head(memo.heads, xs, level, done, PAGE_SIZE))
        while len(level) > PAGE_SIZE:
            level = [self.group(level[i : i + PAGE_SIZE]) for i in range(0, len(level), PAGE_SIZE)]
        content = sum(c for _, c in level)
        text = tree_text([d for d, _ in level])
        size = 1 + content + n  # brackets and the commas between elements
        return (text, size) if len(text) < INLINE_LIMIT else (self.cut(text), size)

    def items(self, xs: Any) -> tuple[int, list[str]]:
        """The elements' encoded texts and the sum of their canonical sizes."""
        texts = []
        content = 0
        value = self.value
        for x in xs:
            text, size = value(x)
            texts.append(text)
            content += size
        return content, texts

    def page(self, items: list[Any] | tuple[Any, ...]) -> tuple[str, int]:
        """One page of a long list as a node: (its hash, its elements' canonical sizes).
        A page of strings or of transcript entries is cut once per memo."""
        memo = self.memo
        key: tuple[Any, ...] | None = None
        if memo is not None and len(items) == PAGE_SIZE:
            first = type(items[0])
            if first is str:
                # Looked up before looking at the elements one by one: a key holds only
                # strings, so an equal page holds the same strings.
                try:
                    hit = memo.pages.get(tuple(items))
                except TypeError:  # an unhashable element: not a page of strings
                    hit = None
                if hit is not None:
                    return hit[1], hit[2]
                if all(type(x) is str for x in items):
                    key = tuple(items)
            elif first is Entry and all(type(x) is Entry for x in items):
                key = ("entries", *map(id, items))  # entries never change: by identity
                hit = memo.pages.get(key)
                if hit is not None and _same(hit[0], items):
                    return hit[1], hit[2]
        content, texts = self.items(items)
        digest = self.store('{"l":[' + ",".join(texts) + "]}")
        if key is not None and memo is not None:
            memo.pages[key] = (tuple(items), digest, content)
            memo.weigh(64 * len(items))
        return digest, content

    def group(self, level: list[tuple[str, int]]) -> tuple[str, int]:
        """A node of page (or group) hashes; a full one is hashed once per memo."""
        hashes = tuple(d for d, _ in level)
        content = sum(c for _, c in level)
        memo = self.memo
        digest = memo.groups.get(hashes) if memo is not None else None
        if digest is None:
            digest = self.store(tree_text(list(hashes)))
            if memo is not None and len(hashes) == PAGE_SIZE:
                memo.groups[hashes] = digest
                memo.weigh(64 * len(hashes))
        return digest, content

    def store(self, text: str) -> str:
        """Make ``text`` a node; return its hash."""
        data = text.encode("utf-8")
        self.hashed += len(data)
        digest = sha256(data).hexdigest()
        self.nodes[digest] = data
        return digest

    def cut(self, text: str) -> str:
        """Make ``text`` a node; return the reference that stands for it."""
        return '{"r":"' + self.store(text) + '"}'


Heads = dict[str, tuple[list[str], list[Any]]]
"""The heads of long lists of strings a cutter cut before (their full pages only), with
what each of those pages gave (``known_head``), by the list's first element. (Two lists
with the same first element take turns: a miss costs what the head saves, no more.)"""


def known_head(heads: Heads, xs: list[Any] | tuple[Any, ...]) -> tuple[int, list[Any]]:
    """How many leading elements of ``xs`` an earlier cut of a list cut into full pages
    (``keep_head``), and what those pages gave; ``(0, [])`` when its head is not ``xs``'s.

    A list that grows at its end (a log, a history) is, at each superstep, the last one
    with an element more: every full page is the same, yet looking each one up costs a
    slice, a tuple and a lookup per page, O(state) a superstep. One comparison of the heads
    (in C, identity first) costs far less. Equal heads cut the same: the head kept holds
    only strings, and a JSON value equal to a string is that string (``str`` subclasses
    are cut as their base)."""
    first = xs[0]
    hit = heads.get(first) if type(first) is str else None
    if hit is None:
        return 0, []
    head, level = hit
    done = len(head)
    if done > len(xs) or (xs[:done] if type(xs) is list else list(xs[:done])) != head:
        return 0, []
    return done, level


def keep_head(
    heads: Heads,
    xs: list[Any] | tuple[Any, ...],
    level: list[Any],
    done: int,
    page_size: int,
) -> int:
    """Keep ``xs``'s full pages and what they gave (``level``: a result per page) for the
    next ``known_head``, when more of them are full than the ``done`` it found and all are
    pages of strings; the weight added (8 a new element held)."""
    full = len(xs) - len(xs) % page_size
    if full <= done or not all(type(x) is str for x in xs[done:full]):
        return 0
    heads[xs[0]] = (list(xs[:full]), level[: full // page_size])
    return 8 * (full - done)


def _same(a: Any, b: Any) -> bool:
    """Element by element identity (ids alone could have been reused)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _str_keys(v: Any) -> bool:
    """True if every object inside ``v`` has only string keys."""
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, y in x.items():
                if type(k) is not str:
                    return False
                if isinstance(y, dict | list | tuple):
                    stack.append(y)
        elif isinstance(x, list | tuple):
            stack.extend(y for y in x if isinstance(y, dict | list | tuple))
    return True


def tree_text(hashes: list[str]) -> str:
    """The encoded form of a tree node over ``hashes`` (pages or groups of pages)."""
    return '{"t":["' + '","'.join(hashes) + '"]}'


def float_text(v: float) -> str:
    """A float's canonical text; NaN and infinities refused (§3.1)."""
    if not math.isfinite(v):
        raise CanonicalJSONError(f"Out of range float values are not JSON compliant: {v!r}")
    return float.__repr__(v)


# --- reading -------------------------------------------------------------------------


class DecodedTexts(Protocol):
    """The canonical text each node reference decoded to, kept by a reader's owner across
    reads (a store's manifests: every run of a workflow references the same nodes)."""

    def text_of(self, digest: str, /) -> str | None: ...

    def keep_text(self, digest: str, text: str, /) -> None: ...


def decode(
    root: JSON,
    fetch: Callable[[str], bytes],
    *,
    cache: dict[str, JSON] | None = None,
    texts: DecodedTexts | None = None,
) -> JSON:
    """Rebuild the value ``root`` encodes, fetching node bytes by hash.

    ``cache`` keeps parsed nodes between calls (e.g. over a whole journal, whose inputs
    share most nodes); ``texts``: a reference whose value was decoded before is parsed from
    that value's canonical text, without its nodes' walk, fetch and hash check (a node's
    hash names its bytes forever). The returned containers are always fresh, only strings
    are shared. Raises ChunkError (or CanonicalJSONError) on anything a cutter would not
    have written.
    """
    return _Reader(fetch, {} if cache is None else cache, texts).value(root)


class _Reader:
    """One decode call (or several sharing ``cache``)."""

    __slots__ = ("cache", "fetch", "texts")

    def __init__(
        self,
        fetch: Callable[[str], bytes],
        cache: dict[str, JSON],
        texts: DecodedTexts | None = None,
    ) -> None:
        self.fetch = fetch
        self.cache = cache
        self.texts = texts

    def node(self, digest: Any) -> JSON:
        if type(digest) is not str:
            raise ChunkError(f"a node reference must be a string, not {type(digest).__name__}")
        parsed = self.cache.get(digest)
        if parsed is None:
            parsed = loads(self.fetch(digest))
            if type(parsed) is dict and "r" in parsed:
                raise ChunkError(f"node {digest} is a bare reference")
            self.cache[digest] = parsed
        return parsed

    def reference(self, digest: JSON) -> JSON:
        """The value a node reference names: from ``texts`` when decoded before."""
        texts = self.texts
        if texts is None or type(digest) is not str:
            return self.value(self.node(digest))
        text = texts.text_of(digest)
        if text is not None:
            return loads(text)  # fresh containers: the caller may change them
        value = self.value(self.node(digest))
        texts.keep_text(digest, canonical_text(value))
        return value

    def value(self, e: JSON) -> JSON:
        t = type(e)
        if t is dict:
            if len(e) != 1:
                raise ChunkError(f"an encoded container has one tag, not {sorted(e)}")
            ((tag, body),) = e.items()
            if tag == "o" and type(body) is dict:
                value = self.value
                return {k: value(v) for k, v in body.items()}
            if tag == "l" and type(body) is list:
                value = self.value
                return [value(x) for x in body]
            if tag == "t" and type(body) is list:
                out: list[JSON] = []
                for digest in body:
                    part = self.value(self.node(digest))
                    if type(part) is not list:
                        raise ChunkError(f"tree child {digest} is not a list")
                    out.extend(part)
                return out
            if tag == "r":
                return self.reference(body)
            if tag == "j" and type(body) in (dict, list):
                return loads(canonical_text(body))  # fresh containers: parsed nodes are cached
            raise ChunkError(f"unknown encoded form tagged {tag!r}")
        if t is list:
            raise ChunkError("a bare array is not an encoded form")
        return e
