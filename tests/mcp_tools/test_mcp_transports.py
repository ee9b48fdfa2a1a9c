"""MCP over streamable HTTP and SSE, ``env:``/``headers:`` from the environment, the
idempotency key in ``_meta``, one server start per run, ``tools: "*"``, a tool node's
``output`` key and ``plait check`` against the servers (docs/mcp.md).

The HTTP servers are real: ``toy_server.py`` (the SDK's MCPServer under uvicorn) started
here on a free loopback port, and the real ``mcp-server-time`` from PyPI over stdio.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import plait
from plait import PlaitError, Runtime, Workflow
from plait.workflow.loader import load_workflow

BIN = Path(sys.executable).parent
PLAIT = str(BIN / "plait")
TIME = [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]
TOY_SCRIPT = str(Path(__file__).with_name("toy_server.py"))
TOY = [sys.executable, TOY_SCRIPT]


def _serve(mode: str) -> Iterator[str]:
    server = subprocess.Popen(
        [*TOY, mode], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    yield from _serve("http")


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    yield from _serve("sse")


@pytest.fixture
def runtime(tmp_path):
    rt = Runtime(f"sqlite:///{tmp_path}/plait.db", principal="alice")
    yield rt
    rt.close()


def a_closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- transports, headers, _meta, output --------------------------------------------


def test_a_tool_node_over_streamable_http_sends_the_header_and_the_idempotency_key(
    runtime, http_url, tmp_path, monkeypatch
):
    monkeypatch.setenv("TOY_TOKEN", "s3cret-value")
    mcp = {"url": http_url, "headers": {"Authorization": "Bearer ${TOY_TOKEN}"}, "tool": "seen"}
    wf = Workflow.new("http").tool("seen", mcp=mcp).node("look", tool="seen", output="seen_by")

    result = runtime.run_sync(wf, {"header": "authorization", "variable": "NONE", "order": 7})

    assert result.status == "completed", result
    seen = result.context["seen_by"]  # the whole result, under the node's output key
    assert seen["header"] == "Bearer s3cret-value"
    [intent] = runtime.store.load_journal(result.run_id).intents
    assert seen["meta"] == {"plait/idempotency_key": intent.idempotency_key}
    assert result.context["order"] == 7 and "header" in result.context  # nothing merged over
    assert "meta" not in result.context
    # The secret is read from the environment when the server is reached: the manifest
    # pins the template, the intent journals the arguments only.
    pinned = json.dumps(runtime.store.manifests(result.run_id))
    assert "s3cret-value" not in pinned and "Bearer ${TOY_TOKEN}" in pinned
    assert "s3cret-value" not in json.dumps(intent.input)
    assert runtime.verify(result.run_id, workflow=wf).verified


def test_the_sse_transport_reaches_a_server_too(runtime, sse_url):
    mcp = {"url": sse_url, "transport": "sse", "tool": "pid"}
    wf = Workflow.new("sse").tool("pid", mcp=mcp).node("who", tool="pid", output="who")

    result = runtime.run_sync(wf, {})

    assert result.status == "completed", result
    assert isinstance(result.context["who"]["pid"], int)


def test_a_header_whose_variable_is_not_set_is_E004_naming_it(runtime, http_url, monkeypatch):
    monkeypatch.delenv("TOY_NOT_SET", raising=False)
    mcp = {"url": http_url, "headers": {"X-Key": "${TOY_NOT_SET}"}, "tool": "pid"}
    wf = Workflow.new("h").tool("pid", mcp=mcp).node("who", tool="pid")

    with pytest.raises(PlaitError) as caught:
        runtime.run_sync(wf, {})

    assert caught.value.code == "E004"
    assert "header X-Key needs the environment variable TOY_NOT_SET" in str(caught.value)


def test_an_mcp_url_that_does_not_answer_is_E004_at_start_naming_url_and_cause(runtime):
    url = f"http://127.0.0.1:{a_closed_port()}/mcp"
    wf = Workflow.new("down").tool("t", mcp={"url": url, "tool": "x"}).node("a", tool="t")

    with pytest.raises(PlaitError) as caught:
        runtime.run_sync(wf, {})

    assert caught.value.code == "E004"
    assert f"tool 't': MCP server {url}: cannot connect (ConnectError" in str(caught.value)
    assert runtime.store.list_runs() == []


def test_env_values_of_a_stdio_server_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("OUTER_SECRET", "from-outside")
    mcp = {"command": TOY, "env": {"TOY_SECRET": "pre-${OUTER_SECRET}"}, "tool": "seen"}
    wf = Workflow.new("env").tool("seen", mcp=mcp).node("look", tool="seen", output="seen")

    result = plait.run_sync(wf, {})

    assert result.status == "completed", result
    assert result.context["seen"]["env"] == "pre-from-outside"
    assert result.context["seen"]["header"] is None  # stdio: no HTTP request


# -- once per run -----------------------------------------------------------------------


@pytest.mark.parametrize("persisted", [True, False])
def test_a_server_is_started_once_per_run(tmp_path, monkeypatch, persisted):
    starts = tmp_path / "starts"
    monkeypatch.setenv("TOY_STARTS", str(starts))
    wf = (
        Workflow.new("once")
        .tool("pid", mcp={"command": TOY, "tool": "pid"})
        .tool("say", mcp={"command": TOY, "tool": "say"})
        .node("a", tool="pid", output="a")
        .node("b", tool="say", output="b")
        .edge("a", "b")
    )

    if persisted:
        with Runtime(f"sqlite:///{tmp_path}/plait.db") as rt:
            result = rt.run_sync(wf, {"text": "hi"})
    else:
        result = plait.run_sync(wf, {"text": "hi"})

    assert result.status == "completed", result
    [pid] = starts.read_text(encoding="utf-8").split()  # listed at start, called twice
    assert result.context["a"] == {"pid": int(pid)}
    assert result.context["b"] == {"text": "hi"}


# -- tools: "*" ---------------------------------------------------------------------


def test_tools_star_offers_every_tool_of_the_server_to_the_model(tmp_path, http_url):
    (tmp_path / "answers.json").write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "toy_say", "arguments": {"text": "hello"}}]},
                {"text": "done"},
            ]
        ),
        encoding="utf-8",
    )
    path = tmp_path / "agent.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: star
            nodes:
              - id: ask
                instruction: Say hello.
                tools: [toy]
            tools:
              toy: {{mcp: {{url: "{http_url}", tools: "*"}}}}
            llm: {{model: "scripted:answers.json"}}
            """
        ),
        encoding="utf-8",
    )
    db = f"sqlite:///{tmp_path}/plait.db"

    with Runtime(db) as rt:
        result = rt.run_sync(load_workflow(path), {})
        assert result.status == "completed", result
        manifest = rt.store.manifests(result.run_id)[0]
        [call] = [e for e in rt.trace(result.run_id) if e["kind"] == "tool"]
        assert rt.verify(result.run_id).verified
        assert rt.resume_sync(result.run_id).status == "completed"

    offered = ["toy_pid", "toy_fail", "toy_slow", "toy_crash", "toy_say", "toy_seen"]
    offered.append("toy_remember")
    assert list(manifest["mcp_catalogue"]["toy"]) == ["tools"]
    assert sorted(manifest["workflow"]["tools"]) == sorted(offered)
    assert manifest["workflow"]["tools"]["toy_say"]["mcp"] == {"url": http_url, "tool": "say"}
    [node] = manifest["workflow"]["nodes"]
    assert node["executor"]["spec"]["tools"] == offered
    assert call["result"] == {"text": "hello"}


# -- plait check ---------------------------------------------------------------------


def check(tmp_path: Path, tools: str, *args: str, nodes: str = "") -> subprocess.CompletedProcess:
    path = tmp_path / "wf.yaml"
    path.write_text(
        f"name: c\nnodes:\n{nodes or '  - {id: a, tool: t}'}\ntools:\n{tools}\n",
        encoding="utf-8",
    )
    return subprocess.run(
        [PLAIT, "check", str(path), *args], capture_output=True, text=True, timeout=120
    )


def test_check_asks_the_servers_and_reports_a_tool_they_do_not_offer(tmp_path, http_url):
    command = json.dumps(TIME)
    good = check(tmp_path, f"  t: {{mcp: {{command: {command}, tool: get_current_time}}}}")
    bad = check(tmp_path, f"  t: {{mcp: {{url: '{http_url}', tool: get_the_time}}}}")

    assert good.returncode == 0, good.stderr
    assert bad.returncode == 2
    assert "PLAIT-E004" in bad.stderr and "does not offer a tool 'get_the_time'" in bad.stderr
    assert "it offers: pid, fail, slow, crash, say, seen, remember" in bad.stderr


def test_check_reports_a_url_that_does_not_answer_unless_offline(tmp_path):
    url = f"http://127.0.0.1:{a_closed_port()}/mcp"
    tools = f"  t: {{mcp: {{url: '{url}', tool: x}}}}"

    down = check(tmp_path, tools)
    offline = check(tmp_path, tools, "--offline")

    assert down.returncode == 2
    assert f"PLAIT-E004 tool 't': MCP server {url}: cannot connect" in down.stderr
    assert offline.returncode == 0, offline.stderr


@pytest.mark.parametrize(
    ("mcp", "nodes", "message"),
    [
        ("{command: [x], url: 'http://h/mcp', tool: t}", "", "give a server as command or url"),
        ("{command: [x]}", "", "give its tools as tool or tools (got none)"),
        ("{command: [x], headers: {A: b}, tool: t}", "", "headers is only for a server given"),
        ("{url: 'http://h/mcp', transport: ws, tool: t}", "", "transport must be"),
        ("{url: 'ftp://h', tool: t}", "", "url must be a URL"),
        ("{command: [x], tools: '*'}", "", "tool 't' is a whole MCP server"),
        ("{command: [x], tool: t}", "  - {id: a, output: o}", "output is only for tool nodes"),
    ],
)
def test_check_refuses_malformed_mcp_settings_with_E019(tmp_path, mcp, nodes, message):
    checked = check(tmp_path, f"  t: {{mcp: {mcp}}}", "--offline", nodes=nodes)

    assert checked.returncode == 2
    assert "PLAIT-E019" in checked.stderr and message in checked.stderr, checked.stderr


def test_a_server_that_stops_answering_mid_run_fails_the_node_naming_url_and_cause(runtime):
    served = _serve("http")
    url = next(served)
    server_gone: list[bool] = []

    def stop_the_server() -> dict:
        served.close()  # terminates the server the run listed at start
        server_gone.append(True)
        return {}

    wf = (
        Workflow.new("stops")
        .tool("pid", mcp={"url": url, "tool": "pid"})
        .node("stop", tool=stop_the_server)
        .node("who", tool="pid", output="who")
        .edge("stop", "who")
    )

    result = runtime.run_sync(wf, {})

    assert server_gone == [True]
    assert result.status == "failed", result
    detail = str(result.outcome["Failed"]["detail"])
    assert detail.startswith(f"ExecutorError: McpServerError: MCP server {url}: lost the"), detail
    [_, call] = runtime.trace(result.run_id)
    assert call["tool"] == "pid" and call["failure"]["cause"] == "ExecutorError"


def test_a_call_resent_after_a_crash_carries_the_same_idempotency_key(tmp_path, http_url):
    path = tmp_path / "once.yaml"
    path.write_text(
        "name: once\nnodes: [{id: call, tool: remember, output: seen}]\n"
        f"tools: {{remember: {{mcp: {{url: '{http_url}', tool: remember}}}}}}\n",
        encoding="utf-8",
    )
    db = f"sqlite:///{tmp_path}/plait.db"

    def plait_cli(*args: str, crash: str = "") -> subprocess.CompletedProcess:
        env = {**os.environ, "PLAIT_CRASH_AT": crash}
        return subprocess.run(
            [PLAIT, *args, "--db", db, "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    # Killed after the server answered, before the result was committed.
    crashed = plait_cli("run", str(path), "--run-id", "r1", crash="result:1")
    resumed = plait_cli("resume", "r1")

    assert crashed.returncode != 0 and resumed.returncode == 0, resumed.stderr
    keys = json.loads(resumed.stdout)["context"]["seen"]["keys"]
    with Runtime(db) as rt:
        [intent] = rt.store.load_journal("r1").intents
    assert keys[-2:] == [intent.idempotency_key] * 2  # sent twice, the same key
