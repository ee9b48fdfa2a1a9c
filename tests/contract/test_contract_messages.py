"""Messages as providers expect them (issue #18 part 3), through `plait run` against a fake
provider on loopback that records every request, for the OpenAI and Anthropic APIs: the
node's instruction is the system message, the run's input a user message, content parts
reach the provider as its image/file parts and are stored once, content-addressed; a part
no provider would take is refused (PLAIT-E032) before anything is written; a run of
engine epoch 2 killed mid-run resumes and verifies."""

from __future__ import annotations

import base64
import json
import signal
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from contract.support import Cli, plait_process
from support.fake_provider import Answer, FakeProvider

INSTRUCTION = "Answer in one word."
PNG = base64.b64encode(bytes(range(256)) * 24).decode()  # 6 KiB: more than one row inlines
PDF = base64.b64encode(b"%PDF-1.4 " + bytes(range(256)) * 20).decode()
API = ("openai", "anthropic")


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(answers=[Answer(("Yes.",))]).start()
    yield fake
    fake.close()


def workflow(cli: Cli, api: str, provider: FakeProvider) -> str:
    spec = provider.openai_spec if api == "openai" else "anthropic:fake"
    llm = {"model": spec, "max_retries": 0}
    text = (
        f"name: ask\nnodes: [{{id: agent, instruction: {INSTRUCTION}}}]\nllm: {json.dumps(llm)}\n"
    )
    (cli.folder / "ask.yaml").write_text(text)
    return "ask.yaml"


def environment(api: str, provider: FakeProvider) -> dict[str, str | None]:
    """Anthropic's SDK finds the fake through its base URL (its key is never checked)."""
    if api == "openai":
        return {}
    return {"ANTHROPIC_BASE_URL": provider.url, "ANTHROPIC_API_KEY": "test"}


def run(cli: Cli, api: str, provider: FakeProvider, input: Any, **kw: Any) -> Any:
    env = {**environment(api, provider), **kw.pop("env", {})}
    flow = workflow(cli, api, provider)
    return cli.run(flow, "r1", "--input", json.dumps(input), env=env, **kw)


@pytest.mark.parametrize("api", API)
def test_the_instruction_is_the_system_message_and_the_input_a_user_message(
    cli: Cli, provider: FakeProvider, api: str
):
    done = run(cli, api, provider, {"prompt": "Is water wet?"})

    assert done.exit_code == 0, done
    (body,) = provider.requests
    if api == "openai":
        assert body["messages"] == [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": "Is water wet?"},
        ]
    else:
        assert body["system"] == INSTRUCTION
        assert body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Is water wet?"}]}
        ]


@pytest.mark.parametrize("api", API)
def test_a_structured_input_is_one_user_message_of_canonical_json(
    cli: Cli, provider: FakeProvider, api: str
):
    run(cli, api, provider, {"order": "A-1", "amount": 3})

    (body,) = provider.requests
    user = body["messages"][-1]["content"]
    text = user if api == "openai" else user[0]["text"]
    assert text == '{"amount":3,"order":"A-1"}'


def image_and_file() -> dict[str, Any]:
    return {
        "$parts": [
            {"type": "text", "text": "What is on this receipt?"},
            {"type": "image", "media_type": "image/png", "data": PNG},
            {"type": "file", "media_type": "application/pdf", "data": PDF, "name": "r.pdf"},
        ]
    }


@pytest.mark.parametrize("api", API)
def test_images_and_files_reach_the_provider_as_its_image_and_file_parts(
    cli: Cli, provider: FakeProvider, api: str
):
    done = run(cli, api, provider, image_and_file())

    assert done.exit_code == 0, done
    (body,) = provider.requests
    user = body["messages"][-1]
    if api == "openai":
        assert user["content"] == [
            {"type": "text", "text": "What is on this receipt?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            {
                "type": "file",
                "file": {"filename": "r.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
            },
        ]
    else:
        assert user["content"] == [
            {"type": "text", "text": "What is on this receipt?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                "title": "r.pdf",
            },
        ]
    assert cli("verify", "r1").data["verified"] is True


def rows_holding(cli: Cli, needle: str) -> dict[str, int]:
    """How many rows of each table hold ``needle`` in any text or blob column."""
    db = sqlite3.connect(cli.db_file)
    try:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        found = {}
        for table in tables:
            count = 0
            for row in db.execute(f'SELECT * FROM "{table}"'):
                cells = [c.decode() if isinstance(c, bytes) else str(c) for c in row]
                count += any(needle in c for c in cells)
            if count:
                found[table] = count
        return found
    finally:
        db.close()


def test_a_part_is_stored_once_content_addressed_however_many_rows_hold_it(
    cli: Cli, provider: FakeProvider
):
    done = run(cli, "openai", provider, image_and_file())

    assert done.exit_code == 0, done
    # manifest input, checkpoints and the llm intent all hold the part: by its node's hash
    assert rows_holding(cli, PNG) == {"nodes": 1}
    assert rows_holding(cli, PDF) == {"nodes": 1}


@pytest.mark.parametrize(
    ("part", "why"),
    [
        ({"type": "image", "media_type": "image/png", "data": PNG}, "bytes, more than the 1000"),
        ({"type": "image", "media_type": "image/tiff", "data": "AAAA"}, "'image/tiff' is not"),
        ({"type": "image", "media_type": "image/png", "data": "not base64!"}, "not base64"),
        ({"type": "video", "data": "AAAA"}, "not a content part"),
    ],
    ids=["too-large", "media-type", "not-base64", "unknown-kind"],
)
def test_a_part_no_provider_would_take_is_refused_before_the_run_is_written(
    cli: Cli, provider: FakeProvider, part: dict[str, Any], why: str
):
    parts = {"$parts": [{"type": "text", "text": "Look."}, part]}

    done = run(cli, "openai", provider, parts, env={"PLAIT_MAX_PART_BYTES": "1000"})

    assert (done.exit_code, done.code) == (2, "PLAIT-E032"), done
    message = done.data["error"]["message"]
    assert "$parts[1]" in message and why in message, message
    assert cli.run_ids() == [] and provider.requests == []  # nothing written, nothing sent


@pytest.mark.parametrize("api", API)
def test_an_epoch_2_run_killed_with_its_turn_journaled_resumes_and_verifies(
    cli: Cli, provider: FakeProvider, api: str
):
    flow = workflow(cli, api, provider)
    env = {k: v for k, v in environment(api, provider).items() if v is not None}
    crashed = plait_process(
        "run", flow, "--run-id", "r1", "--input", json.dumps({"prompt": "Is water wet?"}),
        "--db", cli.db, cwd=cli.folder, env={**env, "PLAIT_CRASH_AT": "intent:1"},
    )  # fmt: skip
    assert crashed.returncode == -signal.SIGKILL, crashed

    resumed = cli("resume", "r1", env=environment(api, provider))
    verified = cli("verify", "r1")

    assert resumed.data["status"] == "completed", resumed
    assert verified.data["verified"] is True, verified
    (body,) = provider.requests  # killed before the turn was sent: sent once, on resume
    system = body["messages"][0]["content"] if api == "openai" else body["system"]
    assert system == INSTRUCTION
    assert '"engine_epoch":4' in manifest_payload(cli)


def manifest_payload(cli: Cli) -> str:
    db = sqlite3.connect(cli.db_file)
    try:
        (payload,) = db.execute("SELECT payload FROM manifests WHERE run_id = 'r1'").fetchone()
        return str(payload)
    finally:
        db.close()


def pinned_epoch(cli: Cli, epoch: int) -> None:
    """Rewrite r1's manifest to say it was written by ``epoch``."""
    db = sqlite3.connect(cli.db_file)
    try:
        payload = manifest_payload(cli)
        assert '"engine_epoch":4' in payload
        changed = payload.replace('"engine_epoch":4', f'"engine_epoch":{epoch}')
        db.execute("UPDATE manifests SET payload = ? WHERE run_id = 'r1'", (changed,))
        db.commit()
    finally:
        db.close()


@pytest.mark.parametrize("epoch", [1, 2, 3, 4])
def test_a_run_resumes_and_verifies_under_the_epoch_its_manifest_pins(
    cli: Cli, provider: FakeProvider, epoch: int
):
    flow = {
        "name": "later",
        "nodes": [
            {"id": "start", "tool": "start"},
            {"id": "agent", "instruction": INSTRUCTION},
        ],
        "edges": [{"from": "start", "to": "agent"}],
        "tools": {"start": {"python": "contract_tools:start"}},
        "llm": {"model": provider.openai_spec, "max_retries": 0},
    }
    (cli.folder / "later.yaml").write_text(json.dumps(flow))
    crashed = plait_process(
        "run", "later.yaml", "--run-id", "r1", "--db", cli.db,
        cwd=cli.folder, env={"PLAIT_CRASH_AT": "intent:1"},
    )  # fmt: skip
    assert crashed.returncode == -signal.SIGKILL, crashed
    # Killed before the tool ran: nothing journaled yet depends on the epoch, so the run
    # stands for one written by an older plait (epochs 1 to 3) as well as for today's.
    if epoch < 4:
        pinned_epoch(cli, epoch)

    resumed = cli("resume", "r1")

    assert resumed.data["status"] == "completed", resumed
    (body,) = provider.requests
    if epoch == 1:  # as plait sent it before epoch 2: one JSON user message
        opening = '{"context":{"started":true},"instruction":"Answer in one word."}'
        assert body["messages"] == [{"role": "user", "content": opening}]
    else:
        assert body["messages"] == [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": '{"started":true}'},
        ]
    assert cli("verify", "r1").data["verified"] is True
