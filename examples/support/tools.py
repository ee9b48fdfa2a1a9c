"""Tools of the governed support example: plain Python functions.

Each returns a JSON object; its top-level keys update the flow state the guards of
flows/support.yaml read (``identity_verified``, ``customer_confirmed``...). When
``SUPPORT_EXECUTIONS`` names a file, every execution appends one line to it (the
tool name), so a test can count what really ran.
"""

from __future__ import annotations

import os

ACCOUNTS = {"C-42": {"name": "Ada", "last4": "1234", "order": "A-1001", "paid_cents": 4999}}


def _executed(tool: str) -> None:
    path = os.environ.get("SUPPORT_EXECUTIONS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(tool + "\n")


def lookup_account(customer_id: str, last4: str) -> dict:
    """Look up a customer's account and check the last four digits of their card."""
    _executed("lookup_account")
    account = ACCOUNTS.get(customer_id)
    verified = account is not None and account["last4"] == last4
    return {"account_id": customer_id if verified else None, "identity_verified": verified}


def disclose_policy(account_id: str) -> dict:
    """Tell the customer the refund policy that applies to their order."""
    _executed("disclose_policy")
    return {"policy_disclosed": True, "policy": "Full refund within 30 days of delivery."}


def offer_refund(account_id: str, amount_cents: int) -> dict:
    """Offer the customer a refund of ``amount_cents``."""
    _executed("offer_refund")
    return {"offered_cents": amount_cents}


def confirm_with_customer(account_id: str, question: str) -> dict:
    """Ask the customer to confirm (scripted here: the customer says yes)."""
    _executed("confirm_with_customer")
    return {"customer_confirmed": True}


def issue_refund(account_id: str, amount_cents: int) -> dict:
    """Issue the refund. Irreversible: the flow lets it run once, after confirmation."""
    _executed("issue_refund")
    return {"refund_id": f"R-{account_id}-{amount_cents}", "refunded_cents": amount_cents}
