"""A Python ``Agent`` as a tool of another (issue #18 part 4a, Python side): the call runs
the other agent as a child run through the node-level ``agents:`` mechanism — journaled,
resumed after a crash without asking any model turn twice, verified, and its tokens
charged to the caller's budget."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Agent
from plait.core.errors import PlaitError
from support.fake_provider import Answer, Call, FakeProvider

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from agents_as_tools import agents  # noqa: E402

ANSWERS = [
    Answer(calls=(Call("researcher", {"input": "Weather in Oslo?"}, id="c1"),)),  # desk
    Answer(calls=(Call("lookup", {"city": "Oslo"}, id="c2"),)),  # researcher
    Answer(("Clear in Oslo.",)),  # researcher's answer
    Answer(("It is clear in Oslo.",)),  # desk's answer
]


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(answers=list(ANSWERS)).start()
    yield fake
    fake.close()


def test_the_called_agent_runs_as_a_child_run_with_its_own_instructions_and_tools(
    provider: FakeProvider, tmp_path: Path
):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with agents(db, provider.openai_spec) as desk:
        state = desk.run_sync("Weather in Oslo?", run_id="r1")
        store = desk._open_store()
        runs = {r.run_id: r for r in store.list_runs()}
        report = desk.verify("r1")

    assert state.output == "It is clear in Oslo."
    desk_tools = {t["function"]["name"] for t in provider.requests[0]["tools"]}
    helper_tools = {t["function"]["name"] for t in provider.requests[1]["tools"]}
    assert desk_tools == {"researcher"} and helper_tools == {"lookup"}
    assert "Look things up." in json.dumps(provider.requests[1]["messages"])
    child = next(r for r in runs if r.startswith("r1~"))
    assert runs[child].parent_run_id == "r1" and runs[child].status == "completed"
    assert report.verified and report.up_to == "terminal"


def test_the_callers_budget_is_charged_with_the_childs_tokens(
    provider: FakeProvider, tmp_path: Path
):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with agents(db, provider.openai_spec) as desk:
        desk.run_sync("Weather in Oslo?", run_id="r1")
        shown = desk._runtime(observer=None).show("r1").to_json()

    assert shown["spent"]["input_tokens"] == 4 * 11  # two desk turns, two researcher turns
    assert shown["spent"]["output_tokens"] == 4 * 7


def test_agents_with_another_model_or_the_same_name_are_refused(tmp_path: Path):
    (tmp_path / "a.json").write_text("[]")
    spec = f"scripted:{tmp_path / 'a.json'}"
    other = Agent(f"scripted:{tmp_path / 'b.json'}", name="other")
    twin_a, twin_b = Agent(spec, name="twin"), Agent(spec, name="twin")

    with pytest.raises(PlaitError) as models:
        Agent(spec, agents=[other]).workflow()
    with pytest.raises(PlaitError) as names:
        Agent(spec, agents=[twin_a, twin_b]).workflow()

    assert models.value.code == "E004" and "runs as a tool" in str(models.value)
    assert names.value.code == "E004" and "distinct names" in str(names.value)


def process(tmp_path: Path, spec: str, mode: str, run_id: str, crash: str = "") -> Any:
    done = subprocess.run(
        [sys.executable, str(HERE / "agents_as_tools.py"), f"sqlite:///{tmp_path / 'p.db'}",
         spec, mode, run_id],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PLAIT_CRASH_AT": crash},
    )  # fmt: skip
    return done.returncode, (json.loads(done.stdout) if done.returncode == 0 else done.stderr)


# The run's intents in order: the desk's turn, its call of the researcher (a tool effect
# of the desk's run), the researcher's turn, its lookup, its answer, the desk's answer.
@pytest.mark.parametrize("crash", [f"intent:{n}" for n in range(1, 7)] + ["result:3"])
def test_a_crash_at_any_boundary_resumes_without_asking_a_turn_twice_and_verifies(
    provider: FakeProvider, tmp_path: Path, crash: str
):
    spec = provider.openai_spec
    code, _ = process(tmp_path, spec, "start", "r1", crash)
    if code == 0:
        pytest.skip(f"the run has fewer boundaries than {crash}")
    assert code == -signal.SIGKILL
    code, resumed = process(tmp_path, spec, "resume", "r1")
    code_v, verified = process(tmp_path, spec, "verify", "r1")

    assert code == 0 and resumed["output"] == "It is clear in Oslo.", resumed
    assert code_v == 0 and verified["verified"] and verified["up_to"] == "terminal", verified
    sent = len(provider.requests)
    # at most the one turn in flight at the crash is sent again
    assert sent in (4, 5)
    if crash.startswith("intent"):
        assert sent == 4  # died before the dispatch: nothing was sent twice
