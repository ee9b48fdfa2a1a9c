"""Bad input where it used to crash: every refusal is a PLAIT-Ennn naming what was wrong and
where, exit 2, no traceback, and the store exactly as it was.

(The common shapes of a malformed file are in test_contract_malformed_files.py; these are the
extremes: numbers too large to store, characters YAML refuses, integers Python will not read,
control characters outside ASCII, and URLs with a typo.)
"""

from __future__ import annotations

import json

import pytest

from contract.support import Cli, plait_process

TOOLS = 'tools: {one: {python: "contract_tools:one"}}\n'
BIG = "9" * 26  # more than a 64-bit integer holds
ONE = "name: x\nnodes: [{id: a, tool: one}]\n"

OUT_OF_RANGE = {
    "sleep_s_float": ("name: x\nnodes: [{id: a, sleep_s: 1e300}]\n", 2, "sleep_s must be <="),
    "sleep_s_int": (f"name: x\nnodes: [{{id: a, sleep_s: {BIG}}}]\n", 2, "sleep_s must be <="),
    "sleep_s_past_a_clock": (
        "name: x\nnodes: [{id: a, sleep_s: 100000000000000000}]\n",
        2,
        "sleep_s must be <=",
    ),
    "sleep_s_beyond_a_float": (
        f"name: x\nnodes: [{{id: a, sleep_s: 0x{'f' * 300}}}]\n",
        2,
        "sleep_s must be <=",
    ),
    "ttl_s": (
        "name: x\nnodes: [{id: a, ask: {prompt: p}}]\nasks: {ttl_s: 10000000000000000}\n",
        3,
        "ttl_s must be <=",
    ),
    "max_usd": (ONE + "budgets: {max_usd: 1e300}\n" + TOOLS, 3, "max_usd must be <="),
    "max_wall_s": (ONE + "budgets: {max_wall_s: 1e300}\n" + TOOLS, 3, "max_wall_s must be <="),
    "max_tokens": (ONE + f"budgets: {{max_tokens: {BIG}}}\n" + TOOLS, 3, "max_tokens must be <="),
    "retries": (
        f"name: x\nnodes: [{{id: a, tool: one, retries: {BIG}}}]\n" + TOOLS,
        2,
        "retries must be <=",
    ),
    "timeout_s": (
        ONE.replace("one", "c") + "tools: {c: {command: [python3], timeout_s: 1e300}}\n",
        3,
        "timeout_s must be <=",
    ),
    "price": (
        "name: x\nnodes: [{id: a, instruction: hi}]\nllm:\n  model: scripted:models/turns.json\n"
        "  prices: {'scripted:models/turns.json': {input_per_mtok: 1e300, output_per_mtok: 1}}\n",
        5,
        "input_per_mtok must be <=",
    ),
}


@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
def test_a_number_too_large_to_keep_is_e019_and_writes_nothing(cli: Cli, name):
    text, line, words = OUT_OF_RANGE[name]
    (cli.folder / f"{name}.yaml").write_text(text)
    before = cli.run("approval.yaml", "kept")

    done = cli.run(f"{name}.yaml", "new")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
    error = done.data["error"]
    assert words in error["message"], error
    assert error["problems"][0]["line"] == line, error
    assert cli.run_ids() == ["kept"]
    assert cli("show", "kept").data == before.data


def test_the_largest_durations_still_run(cli: Cli):
    (cli.folder / "long.yaml").write_text(
        "name: x\nnodes: [{id: a, sleep_s: 1000000000000000}, {id: b, ask: {prompt: p}}]\n"
        "edges: [{from: a, to: b}]\nasks: {ttl_s: 1000000000000000}\n"
    )

    done = cli.run("long.yaml", "r1")

    assert (done.exit_code, done.data["status"]) == (3, "parked"), done


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"])
def test_a_control_character_in_a_yaml_file_is_e019_with_its_line(cli: Cli, char):
    path = cli.folder / "ctl.yaml"
    path.write_text(f'name: x\nnodes: [{{id: a, sleep_s: 1}}]\ndescription: "{char}"\n')

    done = cli.run("ctl.yaml", "r1")
    checked = cli.raw("check", str(path))

    assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
    assert done.data["error"]["problems"][0]["line"] == 3
    assert f"U+{ord(char):04X}" in done.data["error"]["message"]
    assert checked.exit_code == 2
    assert checked.stderr.startswith(f"{path}:3: PLAIT-E019 invalid YAML"), checked
    assert cli.run_ids() == []


def test_an_integer_python_will_not_read_is_e019_in_a_yaml_file(cli: Cli):
    (cli.folder / "digits.yaml").write_text(f"name: x\nnodes: [{{id: a, sleep_s: {'9' * 5000}}}]\n")

    done = cli.run("digits.yaml", "r1")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
    assert done.data["error"]["problems"][0]["line"] == 2
    assert "5000 digits" in done.data["error"]["message"]
    assert cli.run_ids() == []


def test_an_integer_python_will_not_read_is_e019_in_input_and_answers(cli: Cli):
    digits = "9" * 5000
    started = cli("run", cli.flow("approval.yaml"), "--input", f'{{"n": {digits}}}')
    (cli.folder / "n.json").write_text(digits)
    from_file = cli("run", cli.flow("approval.yaml"), "--input", "@n.json")
    before = cli.run("approval.yaml", "kept")
    ask = cli.only_ask("kept")["ask_id"]
    answered = cli("respond", "kept", ask, "--result", digits, principal="bob")

    for done in (started, from_file, answered):
        assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
        assert "more than 4300 digits" in done.data["error"]["message"]
    assert cli.run_ids() == ["kept"]
    assert cli("show", "kept").data == before.data


def test_a_c1_control_character_is_a_control_character_in_ids(cli: Cli):
    (cli.folder / "nel.yaml").write_text('name: x\nnodes: [{id: "a\\x85b", tool: one}]\n' + TOOLS)

    node = cli.run("nel.yaml", "r1")
    run = cli.run("approval.yaml", "a\x85b")

    assert (node.exit_code, node.code) == (2, "PLAIT-E019"), node
    assert "id contains a control character" in node.data["error"]["message"]
    assert (run.exit_code, run.code) == (2, "PLAIT-E019"), run
    assert "--run-id" in run.data["error"]["message"]
    assert cli.run_ids() == []


def test_a_model_reporting_a_huge_token_count_is_charged_exactly(cli: Cli):
    usage = 10**30
    (cli.folder / "models" / "huge.json").write_text(
        json.dumps([{"text": "hi", "usage": {"input_tokens": usage, "output_tokens": 5}}])
    )
    (cli.folder / "priced.yaml").write_text(
        "name: x\nnodes: [{id: a, instruction: hi}]\nllm:\n  model: scripted:models/huge.json\n"
        "  prices: {'scripted:models/huge.json': {input_per_mtok: 0.15, output_per_mtok: 0.6}}\n"
    )

    done = cli.run("priced.yaml", "r1")

    assert (done.exit_code, done.data["status"]) == (0, "completed"), done
    assert done.data["spent"]["usd_micros"] == usage * 15 // 100 + 3


@pytest.mark.parametrize(
    "ceiling", ["usd=1e300", "tokens=1e300", "wall_s=1e300", "storage_bytes=9223372036854775808"]
)
def test_a_ceiling_beyond_a_64_bit_counter_is_e019(cli: Cli, ceiling):
    cli.run("loop.yaml", "r1")

    raised = cli("raise-budget", "r1", ceiling)
    forked = cli("fork", "r1", "--budget", ceiling)

    for done in (raised, forked):
        assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
        assert "must be <=" in done.data["error"]["message"]
    assert cli.run_ids() == ["r1"]
    assert cli("resume", "r1").data["status"] == "budget_exhausted"  # nothing was raised


def test_the_largest_ceiling_is_kept_exactly(cli: Cli):
    cli.run("loop.yaml", "r1")

    done = cli("raise-budget", "r1", "storage_bytes=9223372036854775807", "usd=2.675")

    assert done.data["budgets"] == {
        "max_storage_bytes": 9223372036854775807,
        "max_usd_micros": 2_675_000,
    }


def test_gc_older_than_too_long_is_e019(cli: Cli):
    cli.run("loop.yaml", "r1")

    done = cli("gc", "--older-than", "99999999999999999999d")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
    assert "--older-than" in done.data["error"]["message"]
    assert cli.run_ids() == ["r1"]


@pytest.mark.parametrize("url", ["sqlite:/x.db", "sqlite:x.db", "postgresql:x"])
def test_a_store_url_missing_its_slashes_is_e020_and_creates_nothing(cli: Cli, url):
    done = cli.raw("run", cli.flow("approval.yaml"), "--db", url, "--json")

    assert (done.exit_code, done.code) == (2, "PLAIT-E020"), done
    assert url in done.data["error"]["message"]
    assert not any(p.name.startswith(("sqlite", "postgres")) for p in cli.folder.iterdir())


def test_the_installed_command_prints_no_traceback_for_the_worst_files(cli: Cli):
    (cli.folder / "nul.yaml").write_text("name: x\x00\nnodes: []\n")
    (cli.folder / "huge.yaml").write_text("name: x\nnodes: [{id: a, sleep_s: 1e300}]\n")
    db = ["--db", cli.db]

    checked = plait_process("check", "nul.yaml", cwd=cli.folder)
    ran = plait_process("run", "huge.yaml", *db, "--json", cwd=cli.folder)
    fed = plait_process("run", "approval.yaml", "--input", "9" * 5000, *db, cwd=cli.folder)

    for done in (checked, ran, fed):
        assert done.returncode == 2, done
        assert "Traceback" not in done.stderr, done.stderr
    assert checked.stderr.startswith("nul.yaml:1: PLAIT-E019 invalid YAML")
    assert json.loads(ran.stdout)["error"]["code"] == "PLAIT-E019"
    assert ran.stderr == ""
    assert fed.stderr.startswith("PLAIT-E019 --input: not valid JSON")
    assert cli.run_ids() == []
