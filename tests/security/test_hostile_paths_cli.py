"""Hostile paths on the command line and in workflow files (issue #20, part 3): a FIFO,
``/dev/zero``, a 300-byte name, a NUL byte and a name that is not UTF-8 are PLAIT-E019
naming the path — as the workflow, a flow, a subgraph, a ``scripted:`` file or ``--input
@FILE`` — never a hang or a traceback. Each CLI call runs in a subprocess whose timeout
is only a safety net (a hang would otherwise hold the suite), not a claim about speed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from plait import files
from plait.core.errors import PlaitError
from plait.workflow import load_workflow
from workers.support import PLAIT

LONG = "a" * 300 + ".yaml"
SAFETY_NET_S = 120


def plait(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return subprocess.run(
        [PLAIT, *args], cwd=cwd, env=env, capture_output=True, timeout=SAFETY_NET_S
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    return tmp_path


def refused(done: subprocess.CompletedProcess[bytes], *words: str) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert "PLAIT-E019" in err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize("verb", ["check", "graph", "run"])
def test_a_fifo_or_a_device_as_the_workflow_is_refused(folder: Path, verb: str):
    refused(plait(verb, "pipe.yaml", cwd=folder), "pipe.yaml", "is a FIFO")
    refused(plait(verb, "/dev/zero", cwd=folder), "/dev/zero", "character device")
    refused(plait(verb, "zero.yaml", cwd=folder), "zero.yaml", "character device")


def test_a_long_name_or_a_name_that_is_not_utf8_is_refused(folder: Path):
    refused(plait("check", LONG, cwd=folder), "longer than 255 bytes")
    refused(plait("check", b"caf\xe9.yaml", cwd=folder), "caf\\xe9.yaml", "not UTF-8")


def test_input_from_a_fifo_or_a_device_is_refused(folder: Path):
    (folder / "wf.yaml").write_text(
        "name: w\nnodes: [{id: a, tool: t}]\ntools: {t: {command: ['true']}}\n"
    )

    for given, words in (("@pipe.yaml", "is a FIFO"), ("@/dev/zero", "character device")):
        done = plait("run", "wf.yaml", "--input", given, "--db", "x.db", cwd=folder)
        refused(done, f"--input {given}", words)
    assert not (folder / "x.db").exists()  # refused before the store was opened


HOSTILE_REFERENCES = f"""\
name: hostile
nodes:
  - id: a
    workflow: {LONG}
  - id: b
    workflow: pipe.yaml
  - id: c
    instruction: go
    flow: "flows/\\0.yaml"
  - id: d
    instruction: go
    flow: zero.yaml
edges:
  - {{from: a, to: b}}
  - {{from: b, to: c}}
  - {{from: c, to: d}}
llm: {{model: "scripted:pipe.yaml"}}
"""


def test_hostile_paths_inside_a_workflow_file_are_each_named(folder: Path):
    (folder / "hostile.yaml").write_text(HOSTILE_REFERENCES)

    err = refused(plait("check", "hostile.yaml", cwd=folder))

    assert "hostile.yaml:4: PLAIT-E019 node 'a': workflow file" in err
    assert "longer than 255 bytes" in err
    assert "hostile.yaml:6: PLAIT-E019 node 'b': workflow file 'pipe.yaml': is a FIFO" in err
    assert "flow file 'flows/\\x00.yaml': the path holds a NUL byte" in err
    assert "flow file 'zero.yaml': is a character device" in err
    assert "scripted model file 'pipe.yaml': is a FIFO" in err


def test_the_loader_refuses_a_scripted_override_that_is_a_fifo(folder: Path):
    (folder / "ask.yaml").write_text("name: q\nnodes: [{id: a, instruction: hi}]\n")

    with pytest.raises(PlaitError) as raised:
        load_workflow(folder / "ask.yaml", "scripted:pipe.yaml")

    assert "is a FIFO" in str(raised.value.problems[0].message)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a\x00b", "the path holds a NUL byte"),
        ("x/" + "b" * 256, "a name in the path is longer than 255 bytes (256)"),
        ("/" + "c/" * 2100, "the path is longer than 4096 bytes"),
        ("bad\udcff", "the path is not UTF-8 text"),
        ("ok/" + "d" * 255, None),
    ],
)
def test_name_problems(name: str, problem: str | None):
    found = files.name_problem(name)
    assert found == problem if problem is None else found is not None and found.startswith(problem)


def test_read_regular_reads_a_file_and_refuses_what_is_over_the_limit(tmp_path: Path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"12345")

    assert files.read_regular(path, limit=5) == b"12345"
    with pytest.raises(files.UnreadableFile) as raised:
        files.read_regular(path, limit=4)
    assert raised.value.refusal.reason == "the file is larger than 4 bytes (5 bytes)"
    with pytest.raises(files.UnreadableFile) as missing:
        files.read_regular(tmp_path / "nope")
    assert missing.value.refusal.missing


def test_read_regular_refuses_a_directory_and_a_socket(tmp_path: Path):
    import socket

    with pytest.raises(files.UnreadableFile, match="is a directory"):
        files.read_regular(tmp_path)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s.yaml"))
        with pytest.raises(files.UnreadableFile, match="is a socket"):
            files.read_regular(tmp_path / "s.yaml")
