"""`plait verify RUN_ID... --workflow FILE` (issue #16, part 4): replay recorded runs against
a new version of their plan, offline; `identical`, or where the new version first decides
otherwise: `{"run_id", "verified": false, "diverged_at": {"superstep", "node", "what"}}`."""

from __future__ import annotations

from pathlib import Path

from contract.support import Cli


def finished(cli: Cli, run_id: str, *, approve: bool) -> None:
    assert cli.run("approval.yaml", run_id).exit_code == 3
    ask = cli.only_ask(run_id)["ask_id"]
    verb = ("approve", "--as", "bob") if approve else ("deny", "--as", "bob", "--reason", "no")
    assert cli(verb[0], run_id, ask, *verb[1:]).exit_code == 0
    assert cli("resume", run_id).data["status"] == "completed"


def version(cli: Cli, name: str, old: str, new: str) -> str:
    text = Path(cli.flow("approval.yaml")).read_text()
    assert old in text
    Path(cli.flow(name)).write_text(text.replace(old, new))
    return cli.flow(name)


def test_a_version_equal_in_meaning_replays_every_run_identically(cli: Cli):
    finished(cli, "yes", approve=True)
    finished(cli, "no", approve=False)
    cosmetic = version(cli, "v.yaml", "name: approval\n", "name: approval\ndescription: x\n")

    done = cli("verify", "--all", "--workflow", cosmetic)
    told = cli.raw("verify", "yes", "--workflow", cli.flow("approval.json"), "--db", cli.db)

    assert done.exit_code == 0 and done.data["verified"] == 2, done.data
    assert told.exit_code == 0 and "identical yes" in told.stdout + told.stderr


def test_a_changed_condition_diverges_where_the_run_took_it(cli: Cli):
    finished(cli, "yes", approve=True)
    swapped = version(cli, "v.yaml", "when: approved}", "when: '!approved'}")

    done = cli("verify", "yes", "--workflow", swapped)

    assert done.exit_code == 1
    report = done.data
    assert report["verified"] is False
    assert set(report["diverged_at"]) == {"superstep", "node", "what"}
    assert report["diverged_at"]["superstep"] == 2
    assert report["diverged_at"]["node"] in ("shipped", "held")
    assert "differs" in report["diverged_at"]["what"]


def test_a_changed_ask_diverges_at_its_node(cli: Cli):
    finished(cli, "yes", approve=True)
    asked = version(cli, "v.yaml", "Ship it?", "Ship it now?")

    report = cli("verify", "yes", "--workflow", asked).data

    assert report["verified"] is False
    assert report["diverged_at"]["node"] == "approve"


def test_a_plan_the_journal_cannot_fit_is_a_divergence_not_a_crash(cli: Cli):
    finished(cli, "yes", approve=True)
    other = Path(cli.flow("other.yaml"))
    other.write_text(
        "name: other\nnodes: [{id: only, tool: start}]\nedges: []\n"
        'tools: {start: {python: "contract_tools:start"}}\n'
    )

    done = cli("verify", "yes", "--workflow", str(other))

    assert done.exit_code == 1 and done.data["verified"] is False
    assert "diverged_at" in done.data


def test_verify_against_a_bad_file_is_exit_2(cli: Cli):
    finished(cli, "yes", approve=True)

    done = cli("verify", "yes", "--workflow", cli.flow("missing.yaml"))

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")


def test_an_added_node_diverges_only_where_a_run_reaches_it(cli: Cli):
    finished(cli, "yes", approve=True)
    finished(cli, "no", approve=False)
    text = Path(cli.flow("approval.yaml")).read_text()
    text = text.replace("  - id: held\n", "  - id: audit\n    tool: start\n  - id: held\n")
    text = text.replace(
        "  - {from: approve, to: held",
        "  - {from: shipped, to: audit}\n  - {from: approve, to: held",
    )
    Path(cli.flow("v2.yaml")).write_text(text)

    yes = cli("verify", "yes", "--workflow", cli.flow("v2.yaml")).data
    no = cli("verify", "no", "--workflow", cli.flow("v2.yaml")).data

    # superstep 3 closes `shipped`, whose new edge fires into `audit`: not superstep 1
    assert yes["verified"] is False
    assert (yes["diverged_at"]["superstep"], yes["diverged_at"]["node"]) == (3, "audit")
    assert no["verified"] is True and no["up_to"] == "terminal"  # never went that way


def test_a_removed_node_diverges_only_where_a_run_needed_it(cli: Cli):
    finished(cli, "yes", approve=True)
    finished(cli, "no", approve=False)
    text = Path(cli.flow("approval.yaml")).read_text()
    text = text.replace("  - id: held\n    tool: take_no\n", "")
    text = text.replace("  - {from: approve, to: held, when: '!approved'}\n", "")
    Path(cli.flow("v2.yaml")).write_text(text)

    yes = cli("verify", "yes", "--workflow", cli.flow("v2.yaml")).data
    no = cli("verify", "no", "--workflow", cli.flow("v2.yaml")).data

    assert yes["verified"] is True and yes["up_to"] == "terminal"
    assert no["verified"] is False and no["diverged_at"]["superstep"] == 2
