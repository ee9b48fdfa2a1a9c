"""Request bodies over the server's limit (``plait serve --max-body-bytes``, 16 MiB by
default) are refused with 413 and PLAIT-E019 without being read to their end, and nothing
of them is journaled; the token is still checked first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from http_api.support import TOKEN, Api
from plait.server import DEFAULT_MAX_BODY_BYTES, create_app
from plait.store import open_store

LIMIT = 1024


@pytest.fixture
def small(api: Api) -> Iterator[Api]:
    """The same store behind a server that reads at most LIMIT bytes of a body."""
    app = create_app(TOKEN, db=api.db, poll_s=0.0, max_body_bytes=LIMIT, workflows=api.folder)
    with TestClient(app) as client:
        yield Api(api.folder, client)


def journal_length(api: Api, run_id: str) -> int:
    store = open_store(api.db)
    try:
        return len(list(store.load_journal(run_id).items()))
    finally:
        store.close()


def assert_too_large(response) -> None:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "PLAIT-E019"
    assert f"over the server's limit of {LIMIT} bytes" in error["message"]


def test_a_body_over_the_limit_is_413_and_journals_nothing(small: Api):
    small.start("question", "r1")
    before = journal_length(small, "r1")

    refused = small.post("/runs/r1/send", {"message": "x" * LIMIT})

    assert_too_large(refused)
    assert journal_length(small, "r1") == before
    accepted = small.post("/runs/r1/send", {"message": "x" * (LIMIT - 100)})
    assert accepted.json() == {"run_id": "r1", "accepted": True}


def test_a_chunked_body_is_cut_off_once_its_chunks_pass_the_limit(small: Api):
    small.start("question", "r1")
    before = journal_length(small, "r1")
    text = json.dumps({"message": "x" * (4 * LIMIT)}).encode()
    chunks = (text[i : i + 256] for i in range(0, len(text), 256))  # no Content-Length

    refused = small.client.post(
        "/runs/r1/send",
        content=chunks,
        headers={**small.auth, "Content-Type": "application/json"},
    )

    assert_too_large(refused)
    assert journal_length(small, "r1") == before


def test_the_token_is_checked_before_the_size(small: Api):
    response = small.client.post("/runs/r1/send", json={"message": "x" * (2 * LIMIT)})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "PLAIT-E029"


def test_the_default_limit_is_16_mib(tmp_path: Path):
    app = create_app(TOKEN, db=f"sqlite:///{tmp_path}/plait.db")
    assert app.state.plait.max_body_bytes == DEFAULT_MAX_BODY_BYTES == 16 * 1024 * 1024
