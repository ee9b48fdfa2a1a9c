"""Shared flows for the governance tests: the CONTRACT.md example, as a document and built."""

from __future__ import annotations

import pytest
import yaml

from plait.governance import Flow, called_ok, is_set, is_true

REFUND_YAML = """
mode: enforce
steps:
  - id: verify
    allow: [lookup_account]
    done: {called_ok: lookup_account}
    posture: Verify the customer's identity before anything else.
  - id: offer
    after: [verify]
    join: all
    gate: {is_set: account}
    allow: [lookup_policy, confirm_with_customer, issue_refund]
    deny: [close_account]
    done: {called_ok: issue_refund}
  - id: wrap_up
    after: [offer]
    terminal: true
constraints:
  - {once: issue_refund}
  - {never: issue_refund, until: {is_true: confirmed}}
  - {before: [verify, offer]}
  - {require: [offer]}
  - {reset: [offer], when: {is_true: customer_changed_mind}}
commit: [{tool: issue_refund, until: {is_true: confirmed}}]
ambient: [escalate_to_human]
"""

REFUND_TOOLS = [
    "lookup_account",
    "lookup_policy",
    "confirm_with_customer",
    "issue_refund",
    "close_account",
    "escalate_to_human",
]


def refund_flow_built() -> Flow:
    return (
        Flow.new()
        .step(
            "verify",
            allow=["lookup_account"],
            done=called_ok("lookup_account"),
            posture="Verify the customer's identity before anything else.",
        )
        .step(
            "offer",
            after=["verify"],
            gate=is_set("account"),
            allow=["lookup_policy", "confirm_with_customer", "issue_refund"],
            deny=["close_account"],
            done=called_ok("issue_refund"),
        )
        .step("wrap_up", after=["offer"], terminal=True)
        .once("issue_refund")
        .never("issue_refund")
        .until(is_true("confirmed"))
        .before("verify", "offer")
        .require("offer")
        .reset("offer")
        .when(is_true("customer_changed_mind"))
        .commit("issue_refund", until=is_true("confirmed"))
        .ambient("escalate_to_human")
        .build()
    )


@pytest.fixture
def refund_doc() -> dict:
    return yaml.safe_load(REFUND_YAML)


@pytest.fixture
def refund_flow() -> Flow:
    return refund_flow_built()


@pytest.fixture
def refund_tools() -> list[str]:
    return list(REFUND_TOOLS)
