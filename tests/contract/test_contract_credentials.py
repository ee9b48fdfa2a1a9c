"""A provider that needs an API key (`openai:`, `anthropic:`) is refused before a run is
driven when the key is not set (PLAIT-E006, exit 2): nothing is written, a parked run stays
parked, and only a run queued for a worker (`--detach`) is left to the worker's own
environment. Without this the run started, ran its tools and failed at its first turn."""

from __future__ import annotations

import pytest

from contract.support import Cli

NO_KEYS: dict[str, str | None] = {
    "OPENAI_API_KEY": None,
    "ANTHROPIC_API_KEY": None,
    "ANTHROPIC_AUTH_TOKEN": None,
}


def agent(cli: Cli, model: str, *, asks_first: bool = False) -> str:
    first = "{id: q, ask: {prompt: Go on?}}, " if asks_first else ""
    text = f"name: keyed\nnodes: [{first}{{id: agent, instruction: Go.}}]\n"
    text += f'llm: {{model: "{model}"}}\n'
    if asks_first:
        text += "edges: [{from: q, to: agent}]\n"
    (cli.folder / "keyed.yaml").write_text(text)
    return "keyed.yaml"


@pytest.mark.parametrize(
    ("model", "names"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-0", "ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"),
    ],
)
def test_a_run_without_its_providers_key_is_refused_before_anything_is_written(
    cli: Cli, model: str, names: str
):
    done = cli.run(agent(cli, model), "r1", env=NO_KEYS)

    assert done.exit_code == 2, done
    assert done.code == "PLAIT-E006"
    message = done.data["error"]["message"]
    assert names in message and model in message
    assert not cli.db_file.exists()  # refused before the store was opened


def test_an_empty_key_counts_as_unset(cli: Cli):
    done = cli.run(agent(cli, "openai:gpt-4o-mini"), "r1", env={**NO_KEYS, "OPENAI_API_KEY": ""})

    assert done.exit_code == 2 and done.code == "PLAIT-E006", done


def test_a_queued_run_is_left_to_the_workers_environment(cli: Cli):
    done = cli.run(agent(cli, "openai:gpt-4o-mini"), "r1", "--detach", env=NO_KEYS)

    assert done.exit_code == 3, done
    assert cli.run_ids() == ["r1"]


def test_resume_and_fork_without_the_key_are_refused_and_the_parked_run_is_kept(cli: Cli):
    keyed = {**NO_KEYS, "OPENAI_API_KEY": "sk-test"}
    parked = cli.run(agent(cli, "openai:gpt-4o-mini", asks_first=True), "r1", env=keyed)
    assert parked.exit_code == 3, parked  # parked on the ask: no turn was taken
    ask = cli.only_ask("r1")
    assert cli("respond", "r1", ask["ask_id"], "--result", '"yes"').exit_code == 0

    resumed = cli("resume", "r1", env=NO_KEYS)
    forked = cli("fork", "r1", env=NO_KEYS)

    assert resumed.exit_code == 2 and resumed.code == "PLAIT-E006", resumed
    assert forked.exit_code == 2 and forked.code == "PLAIT-E006", forked
    assert cli.run_ids() == ["r1"]
    assert cli("show", "r1").data["status"] == "parked"
    assert cli("verify", "r1").data["verified"] is True
