"""``plait`` run by this process's own CLI: a drop-in for ``subprocess.run([PLAIT, ...])``.

Starting a ``plait`` process costs about a second here (the interpreter and its imports),
which is most of a CLI test's time. A verb run in-process goes through the same code and
the same store file (opened, used and closed by the verb), so tests whose subject is not
the process boundary use this; a call that must die (``PLAIT_CRASH_AT``) or must be a
fresh process keeps ``subprocess.run``. ``env`` becomes the whole environment during the
call, as it would be a child's; ``cwd`` its working directory.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from contextlib import chdir
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from plait.cli import app


def run_cli(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | str, **_: Any
) -> subprocess.CompletedProcess[str]:
    """``argv`` as given to ``subprocess.run``: ``[PLAIT, verb, ...]``."""
    environ: dict[str, str | None] = {k: None for k in os.environ if k not in env}
    environ.update(env)
    with chdir(cwd):
        done = CliRunner().invoke(app, list(argv[1:]), env=environ, catch_exceptions=False)
    return subprocess.CompletedProcess(list(argv), done.exit_code, done.stdout, done.stderr)


def run_plait(argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    """In a real process when the call is to crash (``PLAIT_CRASH_AT``), else in this one."""
    if "PLAIT_CRASH_AT" in kw.get("env", {}):
        return subprocess.run(argv, **kw)
    return run_cli(argv, **kw)
