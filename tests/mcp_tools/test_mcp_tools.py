"""Tools of MCP servers over stdio (docs/architecture.md §4), against real server processes.

The time server is the real ``mcp-server-time`` from PyPI, run with
``--local-timezone UTC`` so the schema it describes does not depend on the
machine. ``toy_server.py`` (next to this file) covers what the time server
cannot show: errors, slowness, crashes, plain-text results.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import plait
from plait import PlaitError, Runtime, Workflow
from plait.tools.mcp import McpPool, McpServerError, ServerSpec
from plait.workflow.pinning import with_catalogue

BIN = Path(sys.executable).parent
PLAIT = str(BIN / "plait")
TIME = [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]
TOY = [sys.executable, str(Path(__file__).with_name("toy_server.py"))]


def clock_workflow(tool: str = "get_current_time") -> Workflow:
    return (
        Workflow.new("clock")
        .tool("clock_now", mcp={"command": TIME, "tool": tool})
        .node("now", tool="clock_now")
    )


def toy_workflow(tool: str, *, timeout_s: float | None = None) -> Workflow:
    return (
        Workflow.new("toy")
        .tool("toy", mcp={"command": TOY, "tool": tool}, timeout_s=timeout_s)
        .node("call", tool="toy")
    )


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def runtime(tmp_path):
    rt = Runtime(f"sqlite:///{tmp_path}/plait.db", principal="alice")
    yield rt
    rt.close()


# -- a tool node -----------------------------------------------------------------


def test_a_tool_node_calls_the_time_server_and_the_run_pins_what_the_server_offered(runtime):
    wf = clock_workflow()

    result = runtime.run_sync(wf, {"timezone": "UTC", "order": "A1"})

    assert result.status == "completed", result
    assert result.context["order"] == "A1"  # a context key the tool does not name is ignored
    assert result.context["timezone"] == "UTC"
    assert result.context["datetime"].endswith("+00:00")
    assert {"day_of_week", "is_dst"} <= set(result.context)
    [entry] = runtime.trace(result.run_id)
    assert entry["kind"] == "tool" and entry["status"] == "completed"
    assert entry["result"]["datetime"] == result.context["datetime"]

    manifest = runtime.store.manifests(result.run_id)[0]
    pinned = manifest["mcp_catalogue"]["clock_now"]
    assert pinned["name"] == "get_current_time"
    assert pinned["description"] == "Get current time in a specific timezone"
    assert pinned["input_schema"]["required"] == ["timezone"]
    assert "'UTC' as local timezone" in json.dumps(pinned["input_schema"])
    tool = manifest["workflow"]["tools"]["clock_now"]
    assert tool["kind"] == "mcp"
    assert tool["description"] == pinned["description"]
    assert tool["input_schema"] == pinned["input_schema"]

    # Resume and verify read the pin: the definition as written still matches the run.
    assert runtime.verify(result.run_id, workflow=wf).verified
    assert runtime.resume_sync(result.run_id, workflow=wf).status == "completed"


def test_a_tool_the_server_does_not_offer_is_E004_at_start_and_nothing_is_written(runtime):
    with pytest.raises(PlaitError) as caught:
        runtime.run_sync(clock_workflow("get_the_time"), {"timezone": "UTC"})

    assert caught.value.code == "E004"
    message = str(caught.value)
    assert "tool 'clock_now'" in message and "'get_the_time'" in message
    assert "it offers: get_current_time, convert_time" in message
    assert runtime.store.list_runs() == []


def test_a_server_that_cannot_start_is_E004_at_start(runtime, tmp_path):
    wf = (
        Workflow.new("nothing")
        .tool("t", mcp={"command": [str(tmp_path / "no-such-server")], "tool": "x"})
        .node("a", tool="t")
    )

    with pytest.raises(PlaitError) as caught:
        runtime.run_sync(wf)

    assert caught.value.code == "E004"
    assert "tool 't'" in str(caught.value) and "no-such-server" in str(caught.value)


def test_a_declared_description_and_input_schema_win_over_the_servers():
    declared = {"type": "object", "properties": {"timezone": {"type": "string"}}}
    wf = (
        Workflow.new("w")
        .tool(
            "clock_now",
            mcp={"command": TIME, "tool": "get_current_time"},
            description="mine",
            input_schema=declared,
        )
        .node("now", tool="clock_now")
    )
    served = {"name": "get_current_time", "description": "theirs", "input_schema": {}}

    filled = with_catalogue(wf, {"clock_now": served})

    assert filled.tools["clock_now"].description == "mine"
    assert filled.tools["clock_now"].input_schema == declared
    assert with_catalogue(wf, None) is wf


# -- an abstract node ------------------------------------------------------------------


def test_an_abstract_node_calls_the_mcp_tool_and_verify_never_starts_the_server(tmp_path):
    server = tmp_path / "time-server"
    server.write_text(f'#!/bin/sh\nexec {" ".join(TIME)} "$@"\n', encoding="utf-8")
    server.chmod(0o755)
    (tmp_path / "answers.json").write_text(
        json.dumps(
            [
                # Invalid against the pinned schema: a corrective re-prompt, no effect.
                {"tool_calls": [{"name": "clock_now", "arguments": {"zone": "UTC"}}]},
                {"tool_calls": [{"name": "clock_now", "arguments": {"timezone": "UTC"}}]},
                {"text": "It is some time in UTC."},
            ]
        ),
        encoding="utf-8",
    )
    workflow = tmp_path / "agent.yaml"
    workflow.write_text(
        textwrap.dedent(
            f"""\
            name: agent
            nodes:
              - id: ask
                instruction: What time is it in UTC?
                tools: [clock_now]
            tools:
              clock_now: {{mcp: {{command: ["{server}"], tool: get_current_time}}}}
            llm: {{model: "scripted:answers.json"}}
            """
        ),
        encoding="utf-8",
    )
    db = f"sqlite:///{tmp_path}/plait.db"

    ran = subprocess.run(
        [PLAIT, "run", str(workflow), "--db", db, "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == "completed"
    assert result["context"]["ask"] == "It is some time in UTC."
    with Runtime(db) as rt:
        tools = [e for e in rt.trace(result["run_id"]) if e["kind"] == "tool"]
        manifest = rt.store.manifests(result["run_id"])[0]
    assert len(tools) == 1
    assert tools[0]["input"] == {"timezone": "UTC"}
    assert tools[0]["status"] == "completed"
    assert tools[0]["result"]["timezone"] == "UTC"
    assert manifest["mcp_catalogue"]["clock_now"]["input_schema"]["required"] == ["timezone"]

    # The server is gone now: starting it would leave a mark and fail.
    marker = tmp_path / "started"
    server.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n", encoding="utf-8")
    verified = subprocess.run(
        [PLAIT, "verify", result["run_id"], "--db", db, "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )

    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["verified"] is True
    assert not marker.exists()


# -- one server per drive, failures ---------------------------------------------------


def test_one_server_process_serves_the_whole_drive_and_stops_when_it_ends():
    wf = (
        Workflow.new("pids")
        .tool("first", mcp={"command": TOY, "tool": "pid"})
        .tool("second", mcp={"command": TOY, "tool": "pid"})
        .node("a", tool="first")
        .node("b", tool="second")
        .edge("a", "b")
        .reducer("pid", "append")
    )

    result = plait.run_sync(wf, {})

    assert result.status == "completed", result
    first, second = result.context["pid"]
    assert first == second
    assert gone(first)


@pytest.mark.parametrize(
    ("tool", "arguments", "timeout_s", "detail"),
    [
        ("fail", {"why": "testing"}, None, "ExecutorError: Error executing tool fail: failed on"),
        ("slow", {"seconds": 30}, 0.5, "Timeout: TimeoutError: MCP tool 'slow' did not finish"),
        ("crash", {}, None, "ExecutorError: McpServerError: MCP server "),
    ],
)
def test_what_goes_wrong_on_the_server_fails_the_node_with_its_cause(
    tool, arguments, timeout_s, detail
):
    result = plait.run_sync(toy_workflow(tool, timeout_s=timeout_s), arguments)

    assert result.status == "failed", result
    assert isinstance(result.outcome, dict)
    assert str(result.outcome["Failed"]["detail"]).startswith(detail)


def test_the_pool_maps_results_and_replaces_a_server_that_went_away(tmp_path):
    async def scenario() -> None:
        spec = {"command": TOY}
        async with McpPool(tmp_path) as pool:
            offered = [t["name"] for t in await pool.list_tools(ServerSpec.of(spec))]
            assert offered == ["pid", "fail", "slow", "crash", "say", "seen", "remember"]

            async def call(tool: str, args: dict, timeout_s: float | None = None):
                return await pool.call({**spec, "tool": tool}, args, timeout_s)

            before = (await call("pid", {})).result["pid"]
            assert (await call("say", {"text": "hello"})).result == {"text": "hello"}
            assert (await call("say", {"text": '{"a": [1]}'})).result == {"a": [1]}
            failed = await call("fail", {})
            assert failed.cause == "ExecutorError"
            assert failed.detail == "Error executing tool fail: failed on purpose: no reason"
            with pytest.raises(TimeoutError):
                await call("slow", {"seconds": 30}, 0.3)
            assert (await call("pid", {})).result["pid"] == before  # still the same server
            with pytest.raises(McpServerError, match="lost the connection calling 'crash'"):
                await call("crash", {})
            after = (await call("pid", {})).result["pid"]
            assert after != before
        assert gone(before) and gone(after)

    asyncio.run(scenario())
