"""Tools of the scenario; each execution is appended to $SCENARIO_EVENTS."""

import os


def _record(line: str) -> None:
    with open(os.environ["SCENARIO_EVENTS"], "a") as f:
        f.write(line + "\n")


def report() -> str:
    _record("report")
    return "0123456789" * 12


def record() -> dict:
    _record("record")
    return {"note": "x" * 60}


def status() -> dict:
    _record("status")
    return {"ok": True}
