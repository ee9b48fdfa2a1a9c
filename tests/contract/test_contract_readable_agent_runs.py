"""Readable agent runs (issue #18 part 6): ``trace`` names each call's tool and shows the
model's text, ``show`` counts turns, tool calls, tokens and cost, PLAIT-E017 names the
store it looked in, ``runs`` prints dates. The ``--json`` additions are fields only: every
field CONTRACT.md lists stays as it was."""

from __future__ import annotations

from contract.support import T0, TRACE_KEYS, Cli


def test_trace_json_names_each_tool_and_each_turns_text_and_calls(cli: Cli) -> None:
    assert cli.run("agent.yaml", "a1").exit_code == 0

    entries = cli("trace", "a1").data["entries"]

    assert all(set(e) >= TRACE_KEYS for e in entries)
    turn, call, answer, finish = entries
    assert (turn["kind"], turn["text"], turn["calls"]) == ("llm", None, ["lookup"])
    assert (call["kind"], call["tool"]) == ("tool", "lookup")  # a model's call
    assert (answer["text"], answer["calls"]) == ("found it", [])
    assert (finish["kind"], finish["tool"]) == ("tool", "finish")  # a tool node
    assert "tool" not in turn and "text" not in call


def test_trace_table_shows_the_tool_called_and_what_the_model_said(cli: Cli) -> None:
    cli.run("agent.yaml", "a1")

    shown = str(cli.raw("trace", "a1", "--db", cli.db, env={"COLUMNS": "160"}))

    rows = [line for line in shown.splitlines() if " llm " in line or " tool " in line]
    assert "calls lookup" in rows[0] and "12 in + 5 out tokens" in rows[0]
    assert "lookup" in rows[1]
    assert "says found it" in rows[2]
    assert "finish" in rows[3]


def test_show_counts_turns_tool_calls_tokens_and_cost(cli: Cli) -> None:
    cli.run("agent.yaml", "a1")

    shown = cli("show", "a1").data
    printed = str(cli.raw("show", "a1", "--db", cli.db, env={"COLUMNS": "160"}))

    assert shown["activity"] == {
        "turns": 2,
        "tool_calls": 2,
        "tools": {"finish": 1, "lookup": 1},
        "input_tokens": 32,
        "output_tokens": 8,
        "usd_micros": 0,
    }
    assert (
        "effects: 2 turns, 2 tool calls (finish 1, lookup 1), 32 input + 8 output tokens,"
        " $0.000000" in printed
    )


def test_show_of_a_run_without_model_turns_adds_nothing(cli: Cli) -> None:
    cli.run("question.yaml", "q1")

    assert "activity" not in cli("show", "q1").data


def test_an_unknown_run_id_names_the_store_it_was_looked_for_in(cli: Cli) -> None:
    for verb in ("show", "trace"):
        done = cli(verb, "nope")

        assert done.exit_code == 2
        assert done.data["error"]["code"] == "PLAIT-E017"
        message = done.data["error"]["message"]
        assert message == f"unknown run id 'nope' in store {cli.db_file}"


def test_runs_prints_created_and_updated_as_utc_dates_and_json_keeps_ms(cli: Cli) -> None:
    cli.run("agent.yaml", "a1", now=T0 + 61_000)

    printed = str(cli.raw("runs", "--db", cli.db, env={"COLUMNS": "160"}))
    listed = cli("runs").data["runs"]

    assert "created (UTC)" in printed and "2026-01-01 00:01:01" in printed
    assert str(T0) not in printed
    assert listed[0]["created_ms"] == T0 + 61_000
