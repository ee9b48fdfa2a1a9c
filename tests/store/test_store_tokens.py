"""API tokens in every back end (conftest.BACKENDS): only digests stored, one per principal."""

from __future__ import annotations

from plait.server.tokens import add_token, find_token, list_tokens, revoke_token, token_digest
from plait.store import Store
from plait.store.base import TokenStore
from plait.store.records import TokenRow


def test_a_token_is_found_by_its_digest_and_replaced_by_the_next(store: Store):
    assert isinstance(store, TokenStore)
    first = TokenRow("alice", "operator", token_digest("one"), 1_000)
    second = TokenRow("alice", "approver", token_digest("two"), 2_000)

    assert store.put_token(first) is True
    assert store.put_token(second) is False  # replaced: the old token stops working

    assert store.token_by_digest(token_digest("one")) is None
    assert store.token_by_digest(token_digest("two")) == second
    assert store.list_tokens() == [second]


def test_revoking_deletes_the_row_and_says_whether_there_was_one(store: Store):
    assert isinstance(store, TokenStore)
    store.put_token(TokenRow("bob", "viewer", token_digest("b"), 1))

    assert store.revoke_token("bob") is True
    assert store.revoke_token("bob") is False
    assert store.token_by_digest(token_digest("b")) is None


def test_add_token_shows_the_token_once_and_stores_only_its_digest(store: Store):
    made = add_token(store, "carol", "admin", 5)

    assert made["principal"] == "carol" and made["role"] == "admin"
    assert made["token"].startswith("plait_") and len(made["token"]) > 40
    assert find_token(store, made["token"]) == TokenRow(
        "carol", "admin", token_digest(made["token"]), 5
    )
    assert find_token(store, made["token"] + "x") is None
    assert list_tokens(store) == {
        "tokens": [{"principal": "carol", "role": "admin", "created_ms": 5}]
    }
    assert revoke_token(store, "carol") == {"principal": "carol", "revoked": True}
