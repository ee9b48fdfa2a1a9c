"""A store this process cannot write (issue #20, part 4): ``show``, ``runs``, ``trace``,
``asks`` and ``verify`` read it read-only and say so on stderr; writing verbs say the
store is read-only here (PLAIT-E020) instead of SQLite's "unable to open database file".

How the store is made read-only: the tests run as root in CI, and root ignores file
permissions, so a ``chmod`` would prove nothing. As root, the store's folder is
bind-mounted read-only (``mount --bind -o ro``: a real read-only file system, EROFS);
as another user, the folder and file are made unwritable with ``chmod``. Where neither
is possible (root without mount rights) the test is skipped, saying why."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from serve_driver.support import FLOW_DIRS
from workers.support import PLAIT

INSPECTING = [["show", "r1"], ["runs"], ["trace", "r1"], ["asks"], ["verify", "r1"]]


def plait(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return subprocess.run(
        [PLAIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    """A store holding one parked run (r1), in a folder this process cannot write:
    (its URL, the folder to run verbs in, how it was made read-only)."""
    work = tmp_path / "work"
    work.mkdir()
    for item in FLOW_DIRS[0].iterdir():
        if item.is_file():
            shutil.copy(item, work / item.name)
    writable = tmp_path / "store"
    writable.mkdir()
    db = f"sqlite:///{writable}/plait.db"
    started = plait("run", "question.yaml", "--run-id", "r1", "--db", db, cwd=work)
    assert started.returncode == 3, started.stderr
    if os.geteuid() == 0:
        frozen = tmp_path / "frozen"
        frozen.mkdir()
        mounted = subprocess.run(
            ["mount", "--bind", "-o", "ro", str(writable), str(frozen)], capture_output=True
        )
        if mounted.returncode != 0:
            pytest.skip(f"root cannot bind-mount read-only here: {mounted.stderr!r}")
        try:
            yield f"sqlite:///{frozen}/plait.db", work, "the file system is read-only"
        finally:
            subprocess.run(["umount", str(frozen)], check=True)
    else:
        (writable / "plait.db").chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        writable.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            yield db, work, "the store file is not writable by this user"
        finally:
            writable.chmod(stat.S_IRWXU)


@pytest.mark.parametrize("verb", INSPECTING, ids=[v[0] for v in INSPECTING])
def test_inspection_verbs_read_a_read_only_store_and_say_so(read_only_store, verb):
    db, work, reason = read_only_store

    done = plait(*verb, "--db", db, "--json", cwd=work)

    assert done.returncode == (3 if verb[0] == "show" else 0), done.stdout + done.stderr
    assert f"plait: {reason}: reading {db} read-only" in done.stderr
    shown = json.loads(done.stdout)
    if verb[0] == "show":
        assert shown["status"] == "parked"
    if verb[0] == "verify":
        assert shown["verified"] is True


@pytest.mark.parametrize(
    "verb", [["cancel", "r1"], ["run", "question.yaml"], ["token", "add", "x", "--role", "viewer"]]
)
def test_writing_verbs_say_the_store_is_read_only(read_only_store, verb):
    db, work, reason = read_only_store

    done = plait(*verb, "--db", db, "--json", cwd=work)

    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "PLAIT-E020"
    assert f"the store is read-only here ({reason})" in error["message"]
    assert "Traceback" not in done.stderr
