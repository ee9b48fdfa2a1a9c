"""Human output (no ``--json``): the words a person reads, on the stream docs/cli.md names.

Off a terminal (CliRunner, pipes) human output goes to stderr and stdout stays empty;
ids a person copies into the next command are printed whole; values are shown as they
are, never read as rich markup; Ctrl-C while a run works ends it like a crash.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from contract.support import OWNER, PLAIT, T0, Cli
from workers.support import wait_for

MARKUP_FLOW = """\
name: "[bold]wf[/bold] [/oops]"
nodes:
  - id: "[/x] start"
    tool: start
  - id: "[red]ask"
    ask: {prompt: "[/] answer [link=http://example.org]me[/link]", approval: true}
edges:
  - {from: "[/x] start", to: "[red]ask"}
tools:
  start: {python: "contract_tools:start"}
"""


def human(cli: Cli, *args: str, columns: int = 80):
    """``plait ARGS --db ...`` without --json, as a pipe sees it."""
    return cli.raw(*args, "--db", cli.db, env={"COLUMNS": str(columns)})


def test_asks_prints_every_ask_id_whole_on_a_narrow_screen(cli: Cli):
    assert cli.run("approval.yaml", "r1").exit_code == 3
    ask_id = cli.only_ask("r1")["ask_id"]

    listed = human(cli, "asks", columns=80)
    approved = human(cli, "approve", "r1", ask_id, "--as", "bob")

    assert listed.exit_code == 0 and listed.stdout == ""
    assert ask_id in listed.stderr and "…" not in listed.stderr
    assert approved.exit_code == 0 and ask_id in approved.stderr


def test_runs_folds_a_long_run_id_instead_of_cutting_it(cli: Cli):
    long_id = "run-" + "x" * 120
    assert cli.run("approval.yaml", long_id).exit_code == 3

    listed = human(cli, "runs", columns=80)

    assert listed.exit_code == 0 and "…" not in listed.stderr
    first_cells = [line.split("│")[1].strip() for line in listed.stderr.splitlines()[3:-1]]
    assert "".join(first_cells) == long_id


def test_values_holding_brackets_are_shown_as_they_are(cli: Cli):
    (cli.folder / "markup.yaml").write_text(MARKUP_FLOW)
    run_id = "[/b]r"
    assert cli("run", cli.flow("markup.yaml"), "--run-id", run_id).exit_code == 3

    listed_runs = human(cli, "runs", columns=200)
    traced = human(cli, "trace", run_id, columns=200)
    listed_asks = human(cli, "asks", columns=200)
    verified = human(cli, "verify", run_id)

    assert [d.exit_code for d in (listed_runs, traced, listed_asks, verified)] == [0, 0, 0, 0]
    assert run_id in listed_runs.stderr and "[bold]wf[/bold] [/oops]" in listed_runs.stderr
    assert "[/x] start" in traced.stderr and "[red]ask" in traced.stderr
    assert "[/] answer [link=http://example.org]me[/link]" in listed_asks.stderr
    assert f"verified {run_id}:" in verified.stderr


# -- Ctrl-C while a run works ----------------------------------------------------------

BLOCKING_TOOLS = """\
import time
from pathlib import Path


def step(i: int = 0) -> dict:
    if i == 1 and Path("block").exists():
        Path("started").touch()
        time.sleep(600)  # holds the event loop's thread: the tool runs inline
    return {"i": i + 1}
"""

BLOCKING_FLOW = """\
name: blocking
nodes:
  - id: step
    tool: step
  - id: done
    tool: step
edges:
  - {from: step, to: step, when: 'i < 3', max_cycles: 5}
  - {from: step, to: done, when: 'i >= 3'}
tools:
  step: {python: "blocking_tools:step"}
"""


@pytest.fixture
def blocking(tmp_path: Path) -> Path:
    """A folder with a workflow whose second superstep blocks while ``block`` exists."""
    (tmp_path / "blocking_tools.py").write_text(BLOCKING_TOOLS)
    (tmp_path / "blocking.yaml").write_text(BLOCKING_FLOW)
    (tmp_path / "block").touch()
    return tmp_path


def environment() -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    return environ | {"PLAIT_NOW_MS": str(T0), "PLAIT_PRINCIPAL": OWNER, "COLUMNS": "80"}


def after(proc: subprocess.Popen[bytes], folder: Path) -> int:
    """Wait until the blocking tool runs, press Ctrl-C, and return how the process ended."""
    wait_for(lambda: (folder / "started").exists() or proc.poll() is not None, "the tool")
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def resumed(folder: Path, db: str) -> dict:
    (folder / "block").unlink()
    shown = subprocess.run(
        [PLAIT, "show", "r1", "--db", db, "--json"],
        cwd=folder,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 3 and json.loads(shown.stdout)["status"] == "running"
    done = subprocess.run(
        [PLAIT, "resume", "r1", "--db", db, "--json"],
        cwd=folder,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def test_ctrl_c_ends_a_run_at_once_by_sigint_printing_nothing_and_it_resumes(blocking: Path):
    db = f"sqlite:///{blocking}/plait.db"
    proc = subprocess.Popen(
        [PLAIT, "run", "blocking.yaml", "--run-id", "r1", "--db", db, "--json"],
        cwd=blocking,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    ended = after(proc, blocking)

    assert ended == -signal.SIGINT  # like a crash: it exits by what stopped it
    assert proc.stdout is not None and proc.stdout.read() == b""
    assert proc.stderr is not None and proc.stderr.read() == b""
    result = resumed(blocking, db)
    assert result["status"] == "completed" and result["context"] == {"i": 4}


def test_ctrl_c_on_a_terminal_clears_the_progress_line_and_says_how_to_go_on(blocking: Path):
    db = f"sqlite:///{blocking}/plait.db"
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [PLAIT, "run", "blocking.yaml", "--run-id", "r1", "--db", db],
        cwd=blocking,
        env=environment(),
        stdout=side,
        stderr=side,
    )
    os.close(side)
    written: list[bytes] = []
    reader = threading.Thread(target=read_all, args=(main, written))
    reader.start()

    ended = after(proc, blocking)
    reader.join(timeout=60)
    shown = b"".join(written).decode("utf-8", "replace")

    assert ended == -signal.SIGINT
    assert "superstep" in shown  # the live progress line was there
    hidden = shown.rindex("\x1b[?25l")  # rich hides the cursor while it draws the line
    assert shown.find("\x1b[?25h", hidden) > hidden  # and shows it again
    hint = "interrupted: run r1 stays as it was journaled; `plait resume r1` goes on"
    assert shown.rstrip().endswith(hint)
    assert resumed(blocking, db)["status"] == "completed"


def read_all(fd: int, into: list[bytes]) -> None:
    """Everything written to a pty, until its last writer has exited."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: no writer is left
            break
        if not chunk:
            break
        into.append(chunk)
    os.close(fd)
