"""`plait serve` as a real process: it stops on SIGTERM even while an event stream follows
a run that is still moving (a queued run nobody drives would otherwise hold it forever);
with --json its one object on stdout says where it listens, and nothing else goes there."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import httpx

from http_api.support import FLOWS, TOKEN
from workers.support import PLAIT, wait_for


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_sigterm_stops_the_server_while_a_stream_follows_a_queued_run(tmp_path: Path):
    # --workers 0: an API-only server, so the queued run stays queued for a worker.
    shutil.copy(FLOWS / "question.yaml", tmp_path)
    for name in [p.name for p in FLOWS.iterdir() if p.suffix == ".py"]:
        shutil.copy(FLOWS / name, tmp_path)
    db = f"sqlite:///{tmp_path}/plait.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    queued = subprocess.run(
        [PLAIT, "run", "question.yaml", "--detach", "--run-id", "q1", "--db", db, "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert queued.returncode == 3, queued.stdout + queued.stderr
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as err:
        server = subprocess.Popen(
            [PLAIT, "serve", "--port", str(port), "--db", db, "--token", TOKEN, "--workers", "0"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_for(lambda: "listening on" in log.read_text() or server.poll() is not None, "up")
        url = f"http://127.0.0.1:{port}/runs/q1/events"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.stream("GET", url, headers=headers, timeout=60) as stream:
            assert stream.status_code == 200
            server.send_signal(signal.SIGTERM)
            body = stream.read().decode()

        assert server.wait(timeout=60) == -signal.SIGTERM  # uvicorn dies by the signal it got
        assert "event: end" not in body  # the run never settled
        assert "Traceback" not in log.read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_serve_json_prints_one_object_and_keeps_its_access_log_off_stdout(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    db = f"sqlite:///{tmp_path}/plait.db"
    server = subprocess.Popen(
        [PLAIT, "serve", "--port", "0", "--db", db, "--token", TOKEN, "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 60)
        assert ready, "no JSON object on stdout"
        listening = json.loads(server.stdout.readline())  # written once it listens
        headers = {"Authorization": f"Bearer {TOKEN}"}
        answer = httpx.get(f"{listening['url']}runs", headers=headers, timeout=60)
        server.send_signal(signal.SIGTERM)
        rest, log = server.communicate(timeout=60)

        assert answer.status_code == 200
        assert listening == {
            "url": f"http://127.0.0.1:{listening['port']}/",
            "host": "127.0.0.1",
            "port": listening["port"],
        }
        assert rest == ""  # the access log line went to stderr
        assert '"GET /runs HTTP/1.1" 200' in log
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
