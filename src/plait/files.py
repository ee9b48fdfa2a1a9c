"""The one way plait reads a file a person named: a workflow, a flow, a subgraph's file, a
scripted model, ``--input @FILE``, and whatever a server is asked to open.

A named path may be hostile, by mistake or on purpose: a FIFO (opening it for reading
waits for a writer, forever), a device (``/dev/zero`` never ends), a socket, a name holding
a NUL byte, a component longer than a file system allows, a name that is not UTF-8. Each
is refused here with a reason naming the path, never a hang, a traceback or a read of
unbounded size: the name is checked first, the type is checked before the file is opened
(``stat``), and the open itself cannot block (``O_NONBLOCK``) and is checked again
(``fstat``) in case the file was swapped in between. Only regular files are read, and
at most ``limit`` bytes of them.

Standard library only; this module decides nothing about which files may be read (the
server's confinement, ``server/confinement.py``, does) and never logs what it reads.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_NAME_BYTES = 255
"""The longest path component (in bytes) every common file system stores."""
MAX_PATH_BYTES = 4096
"""The longest whole path (in bytes) Linux resolves (``PATH_MAX``)."""
DEFAULT_LIMIT = 10_000_000
"""The largest file read unless a caller says otherwise (10 MB)."""


@dataclass(frozen=True)
class Refusal:
    """Why a named file cannot be read: ``reason`` for a person, ``missing`` when it simply
    is not there (callers report that as 'not found', PLAIT-E004, where they did before)."""

    reason: str
    missing: bool = False
    line: int | None = None
    """The line of the first byte that is not UTF-8 (``read_text``), when that is why."""


class UnreadableFile(Exception):
    """A named file that ``read_regular`` refused; ``refusal`` says why."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.reason)
        self.refusal = refusal


def shown(path: str | os.PathLike[str]) -> str:
    """A path as a message can name it: NUL bytes and undecodable bytes escaped, and a
    very long path cut in the middle, so the message stays one readable line."""
    text = os.fspath(path)
    try:  # a name read from the OS: its undecodable bytes as \xNN
        text = os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeError:  # text no file name can hold (a lone surrogate)
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = text.replace("\x00", "\\x00")
    return text if len(text) <= 200 else f"{text[:120]}…{text[-60:]}"


def name_problem(path: str | os.PathLike[str]) -> str | None:
    """What is wrong with a path's *name* (None: nothing): a NUL byte, a name that is not
    UTF-8, a component over ``MAX_NAME_BYTES`` bytes, a path over ``MAX_PATH_BYTES``."""
    text = os.fspath(path)
    if "\x00" in text:
        return "the path holds a NUL byte"
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        return "the path is not UTF-8 text"
    if len(encoded) > MAX_PATH_BYTES:
        return f"the path is longer than {MAX_PATH_BYTES} bytes ({len(encoded)})"
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > MAX_NAME_BYTES:
        return f"a name in the path is longer than {MAX_NAME_BYTES} bytes ({longest})"
    return None


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _os_refusal(exc: OSError) -> Refusal:
    missing = exc.errno in (errno.ENOENT, errno.ENOTDIR)
    return Refusal(f"cannot read the file: {exc.strerror or exc}", missing)


def file_refusal(path: str | os.PathLike[str]) -> Refusal | None:
    """Why ``path`` is not a regular file plait may read (None: it is one), without opening it."""
    problem = name_problem(path)
    if problem is not None:
        return Refusal(problem)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return _os_refusal(exc)
    if not stat.S_ISREG(mode):
        return Refusal(f"is {_kind(mode)}, not a regular file")
    return None


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a regular file plait may read; never raises."""
    return file_refusal(path) is None


def read_regular(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); ``UnreadableFile`` saying
    why not (see the module docstring). Never blocks on the file's type."""
    refusal = file_refusal(path)
    if refusal is not None:
        raise UnreadableFile(refusal)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UnreadableFile(_os_refusal(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped since the stat above
            raise UnreadableFile(Refusal(f"is {_kind(info.st_mode)}, not a regular file"))
        if info.st_size > limit:
            raise UnreadableFile(Refusal(_too_large(limit, info.st_size)))
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while being read
                raise UnreadableFile(Refusal(_too_large(limit, size)))
        return b"".join(chunks)
    except OSError as exc:
        raise UnreadableFile(_os_refusal(exc)) from None
    finally:
        os.close(fd)


def _too_large(limit: int, size: int) -> str:
    bound = f"{limit // 1_000_000} MB" if limit % 1_000_000 == 0 else f"{limit} bytes"
    return f"the file is larger than {bound} ({size} bytes)"


def read_text(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT) -> str:
    """``read_regular`` as UTF-8 text (a byte-order mark is dropped); ``UnreadableFile``
    also when the bytes are not UTF-8, naming the line of the first bad byte."""
    data = read_regular(path, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        reason = f"the file is not UTF-8 text (byte {exc.start})"
        raise UnreadableFile(Refusal(reason, line=line)) from None


def resolved(path: str | os.PathLike[str]) -> Path | None:
    """The absolute path with every link resolved, or None when the name cannot be one
    (``name_problem``) or the OS cannot resolve it (a loop of links)."""
    if name_problem(path) is not None:
        return None
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None
