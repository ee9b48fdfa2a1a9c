"""``plait serve``: the HTTP API and the web console (docs/server.md).

FastAPI and uvicorn are optional (``pip install 'plait[server]'``); they are imported
only here, once the verb runs, so every other verb works without them.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import socket
import sys
from collections.abc import Mapping
from typing import Annotated, Any, TextIO

import typer

from plait.cli.common import AsOption, DbOption, JsonOption
from plait.cli.output import EXIT_REFUSED, Output
from plait.core.errors import PlaitError
from plait.driver.defaults import default_db
from plait.driver.worker import DEFAULT_POLL_MS
from plait.server.auth import TOKEN_ENV, resolve_token
from plait.server.confinement import Confinement
from plait.server.drivers import DEFAULT_CONCURRENCY, DEFAULT_WORKERS
from plait.server.limits import DEFAULT_MAX_BODY_BYTES
from plait.store import open_store

SERVER_MODULES = ("fastapi", "uvicorn")


def missing_server_modules() -> list[str]:
    return [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]


def server_token(given: str | None, environ: Mapping[str, str], err: TextIO) -> str:
    """The token to serve with; a generated one is shown once on ``err`` (never logged)."""
    token, generated = resolve_token(given, environ)
    if generated:
        err.write(
            f"plait serve: no --token or ${TOKEN_ENV} given; this server's token is\n"
            f"  {token}\n"
            "(send it as 'Authorization: Bearer <token>'; the console asks for it)\n"
        )
        err.flush()
    return token


def stderr_logging() -> dict[str, Any]:
    """uvicorn's logging with its access log on stderr too (uvicorn writes it on stdout),
    so stdout carries only what plait prints: nothing, or the one object of --json."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    return config


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), or PLAIT-E019 saying why
    there cannot be one (an address in use, a host that does not resolve), before serving."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise PlaitError("E019", f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)  # connections wait in the backlog until the server takes them
    except OSError as exc:
        sock.close()
        raise PlaitError("E019", f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def serve(
    host: Annotated[str, typer.Option("--host", metavar="H", help="Address to listen on.")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option("--port", metavar="P", min=0, max=65535, help="Port to listen on.")
    ] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="T",
            help=f"The bearer token (default ${TOKEN_ENV}, else a generated one, shown once).",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int,
        typer.Option(
            "--max-body-bytes",
            metavar="N",
            min=1,
            help="Refuse larger request bodies (413).",
        ),
    ] = DEFAULT_MAX_BODY_BYTES,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            metavar="N",
            min=0,
            help="Driver loops in the server (0: API only; runs wait for `plait worker`).",
        ),
    ] = DEFAULT_WORKERS,
    worker_concurrency: Annotated[
        int,
        typer.Option(
            "--worker-concurrency", metavar="N", min=1, help="Runs each driver loop drives at once."
        ),
    ] = DEFAULT_CONCURRENCY,
    poll_ms: Annotated[
        int,
        typer.Option(
            "--poll-ms",
            metavar="MS",
            min=1,
            help="Drivers claim at least this often (answers given here wake them at once).",
        ),
    ] = DEFAULT_POLL_MS,
    workflows: Annotated[
        str | None,
        typer.Option(
            "--workflows",
            metavar="DIR",
            help="The only folder whose workflow files requests may name (default: this one).",
        ),
    ] = None,
    allow_model: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-model",
            metavar="PREFIX",
            help="Admit a request's model override starting with PREFIX (repeatable).",
        ),
    ] = None,
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Serve the HTTP API and the web console, and drive runs, until stopped (Ctrl-C).

    With --as, the token always acts as that principal; else a request may name one ("as").
    Tokens from `plait token add` act only as their principal, within their role.
    Its drivers (--workers) drive runs started here and every run an answer, a cancel, a
    message, a raise or a timer makes due; SIGTERM lets the drives in flight finish or park.
    """
    missing = missing_server_modules()
    if missing:
        sys.stderr.write(
            f"plait serve needs {' and '.join(missing)}, which are not installed:"
            " pip install 'plait[server]'\n"
        )
        raise typer.Exit(EXIT_REFUSED)
    out = Output(json_output)
    url = db or default_db()
    with out.reporting():
        open_store(url).close()  # an unreachable store refuses now, not at the first request
        confinement = Confinement.of(workflows, tuple(allow_model or ()))  # a missing folder
        sock = listening_socket(host, port)  # and an address it cannot have
    import uvicorn

    from plait.server.app import create_app

    app = create_app(
        server_token(token, os.environ, sys.stderr),
        db=url,
        principal=principal,
        bound=principal is not None,
        stopping=lambda: server.should_exit,  # event streams of moving runs close on a stop
        max_body_bytes=max_body_bytes,
        workers=workers,
        worker_concurrency=worker_concurrency,
        worker_poll_ms=poll_ms,
        workflows=confinement.root,
        allow_models=confinement.allow_models,
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level="info", log_config=stderr_logging())
    )
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    address = f"http://{shown}:{bound_port}/"
    sys.stderr.write(f"plait serve: listening on {address} (Ctrl-C stops it)\n")
    sys.stderr.flush()
    if json_output:  # its one object: where it listens (with --port 0, the port it took)
        out.data({"url": address, "host": bound_host, "port": bound_port})
    server.run(sockets=[sock])
