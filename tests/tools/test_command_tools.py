"""Subprocess command tools: JSON on stdin, JSON on stdout, env, exit status, timeouts (§4).

Every test runs real processes: small Python scripts written to ``tmp_path`` and
run with this interpreter.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import plait
from plait.core.keys import JournalKey, idempotency_key
from plait.tools.command import run_command, stderr_tail
from plait.workflow import Workflow, load_workflow

PLAIT = str(Path(sys.executable).parent / "plait")

ECHO = """
    import json, os, sys
    context = json.load(sys.stdin)
    print(json.dumps({
        "seen": context,
        "tool_name": os.environ.get("PLAIT_TOOL_NAME"),
        "idempotency_key": os.environ.get("PLAIT_IDEMPOTENCY_KEY"),
        "cwd": os.getcwd(),
    }))
"""


def script(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def one_tool(tmp_path: Path, body: str, *, timeout_s: float | None = None, retries: int = 0):
    """A one-node workflow whose tool ``t`` runs ``body`` as a Python script in ``tmp_path``."""
    path = script(tmp_path, "tool.py", body)
    return (
        Workflow.new("cmd")
        .tool("t", command=[sys.executable, str(path)], timeout_s=timeout_s)
        .node("a", tool="t", retries=retries)
    )


def failure(result: plait.RunResult) -> str:
    assert result.status == "failed", result
    assert isinstance(result.outcome, dict)
    return str(result.outcome["Failed"]["detail"])


# -- success -------------------------------------------------------------------


def test_a_command_tool_reads_the_context_on_stdin_and_its_json_merges_into_the_context(
    tmp_path,
):
    wf = one_tool(tmp_path, ECHO)

    result = plait.run_sync(wf, {"order": "A1", "amount": 5}, run_id="run-1")

    assert result.status == "completed"
    assert result.context["order"] == "A1"
    assert result.context["seen"] == {"order": "A1", "amount": 5}


def test_a_command_tool_learns_its_name_and_the_effects_idempotency_key_from_its_environment(
    tmp_path,
):
    wf = one_tool(tmp_path, ECHO)
    given = {"order": "A1"}

    result = plait.run_sync(wf, given, run_id="run-1")

    key = JournalKey("run-1", "", "a", 1, 0, "tool")
    assert result.context["tool_name"] == "t"
    assert result.context["idempotency_key"] == idempotency_key(key, given)


def test_a_command_tool_runs_in_a_durable_run_and_its_key_matches_the_journal(tmp_path):
    wf = one_tool(tmp_path, ECHO)

    with plait.Runtime(f"sqlite:///{tmp_path / 'p.db'}", principal="p") as runtime:
        result = runtime.run_sync(wf, {"order": "A1"})
        (entry,) = runtime.trace(result.run_id)

    assert result.status == "completed"
    assert result.context["seen"] == {"order": "A1"}
    key = JournalKey(
        result.run_id,
        entry["task_path"],
        entry["node"],
        entry["attempt"],
        entry["effect_seq"],
        entry["kind"],
    )
    assert result.context["idempotency_key"] == idempotency_key(key, entry["input"])
    assert entry["result"] == {k: result.context[k] for k in entry["result"]}


def test_a_command_tool_of_a_workflow_file_runs_in_the_files_folder(tmp_path, monkeypatch):
    folder = tmp_path / "desk"
    folder.mkdir()
    script(folder, "echo.py", ECHO)
    path = folder / "wf.yaml"
    path.write_text(
        "name: desk\nnodes: [{id: a, tool: echo}]\n"
        f"tools: {{echo: {{command: [{json.dumps(sys.executable)}, echo.py], timeout_s: 30}}}}\n"
    )
    monkeypatch.chdir(tmp_path)  # not the file's folder: echo.py must still be found

    with plait.Runtime(f"sqlite:///{tmp_path / 'p.db'}", principal="p") as runtime:
        result = runtime.run_sync(load_workflow(path), {"n": 1})

    assert result.status == "completed"
    assert result.context["cwd"] == str(folder.resolve())


def test_plait_run_of_a_file_with_a_command_tool_prints_the_context_as_json(tmp_path):
    folder = tmp_path / "desk"
    folder.mkdir()
    script(
        folder,
        "send_email.py",
        """
        import json, sys
        context = json.load(sys.stdin)
        print(json.dumps({"notified": context["to"], "sent": 1}))
        """,
    )
    path = folder / "wf.yaml"
    path.write_text(
        "name: mailer\nnodes: [{id: notify, tool: send_email}]\n"
        f"tools: {{send_email: {{command: [{json.dumps(sys.executable)}, send_email.py],"
        " timeout_s: 30}}\n"
    )

    done = subprocess.run(
        [
            PLAIT,
            "run",
            str(path),
            "--db",
            "sqlite:///" + str(tmp_path / "p.db"),
            "--input",
            '{"to": "ann@example.com"}',
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["status"] == "completed"
    assert shown["context"] == {"to": "ann@example.com", "notified": "ann@example.com", "sent": 1}


# -- failures --------------------------------------------------------------------


def test_a_non_zero_exit_fails_the_run_with_executor_error_naming_the_status_and_stderr(
    tmp_path,
):
    wf = one_tool(
        tmp_path,
        """
        import sys
        print("connecting to smtp", file=sys.stderr)
        print("smtp refused the message", file=sys.stderr)
        sys.exit(3)
        """,
    )

    detail = failure(plait.run_sync(wf, {}))

    assert detail == (
        "ExecutorError: command exited with status 3: connecting to smtp\nsmtp refused the message"
    )


def test_the_failure_detail_keeps_only_the_last_lines_of_stderr():
    stderr = "".join(f"line {i}\n" for i in range(100)).encode()

    assert stderr_tail(stderr) == "\n".join(f"line {i}" for i in range(90, 100))


@pytest.mark.parametrize(
    ("printed", "why"),
    [
        ("print('sent')", "command output is not JSON: Expecting value"),
        ("print('{\"n\": NaN}')", "command output is not JSON: NaN is not valid JSON"),
        ("pass", "command printed nothing"),
        ("import sys; sys.stdout.buffer.write(b'\\xff')", "command output is not UTF-8 text"),
    ],
)
def test_output_that_is_not_json_is_an_executor_error_naming_the_problem(tmp_path, printed, why):
    wf = one_tool(tmp_path, printed)

    detail = failure(plait.run_sync(wf, {}))

    assert detail.startswith(f"ExecutorError: {why}")


def test_a_program_that_does_not_exist_is_an_executor_error(tmp_path):
    wf = Workflow.new("cmd").tool("t", command=["plait-no-such-program"]).node("a", tool="t")

    detail = failure(plait.run_sync(wf, {}))

    assert detail.startswith("ExecutorError: FileNotFoundError:")


def test_a_command_overrunning_timeout_s_is_killed_and_fails_with_timeout(tmp_path):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    wf = one_tool(tmp_path, f"open({str(fifo)!r}).read()", timeout_s=0.5)

    detail = failure(plait.run_sync(wf, {}))

    assert detail == "Timeout: command did not finish within 0.5 s"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_timeout_kills_the_processes_the_command_started(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    wf = one_tool(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(300)
        """,
        timeout_s=2,
    )

    detail = failure(plait.run_sync(wf, {}))

    assert detail.startswith("Timeout:")
    assert pid_file.exists()
    assert not alive_after_a_grace_period(int(pid_file.read_text()))


def alive_after_a_grace_period(pid: int) -> bool:
    """Whether ``pid`` is still a live (not zombie) process after up to ten seconds."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def test_a_failing_command_tool_is_rerun_by_the_nodes_retries(tmp_path):
    runs = tmp_path / "runs.txt"
    wf = one_tool(
        tmp_path,
        f"""
        import json, os, sys
        with open({str(runs)!r}, "a") as log:
            log.write(os.environ["PLAIT_IDEMPOTENCY_KEY"] + "\\n")
        if len(open({str(runs)!r}).read().splitlines()) < 3:
            sys.exit("not yet")
        print(json.dumps({{"done": True}}))
        """,
        retries=2,
    )

    result = plait.run_sync(wf, {})

    assert result.status == "completed" and result.context == {"done": True}
    keys = runs.read_text().splitlines()
    assert len(keys) == 3 and len(set(keys)) == 3  # each attempt is its own effect


def test_a_command_tool_that_keeps_failing_exhausts_its_retries(tmp_path):
    runs = tmp_path / "runs.txt"
    wf = one_tool(
        tmp_path,
        f"""
        import sys
        open({str(runs)!r}, "a").write("x")
        sys.exit(1)
        """,
        retries=1,
    )

    detail = failure(plait.run_sync(wf, {}))

    assert detail == "ExecutorError: command exited with status 1"
    assert runs.read_text() == "xx"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_cancelled_command_effect_kills_its_process(tmp_path):
    pid_file, fifo = tmp_path / "tool.pid", tmp_path / "never-written"
    os.mkfifo(fifo)
    body = f"import os; open({str(pid_file)!r}, 'w').write(str(os.getpid())); open({str(fifo)!r})"

    async def start_then_cancel() -> None:
        call = asyncio.create_task(
            run_command(
                [sys.executable, "-c", body], "{}", cwd=tmp_path, env_extra={}, timeout_s=None
            )
        )
        while not pid_file.exists() or not pid_file.read_text():
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(asyncio.wait_for(start_then_cancel(), 60))

    assert not alive_after_a_grace_period(int(pid_file.read_text()))
