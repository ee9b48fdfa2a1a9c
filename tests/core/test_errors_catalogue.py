"""Every error code is unique and documented in docs/errors.md (§13)."""

from __future__ import annotations

import re
from pathlib import Path

from plait.core.errors import CATALOGUE, PlaitError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def test_every_code_is_documented_once():
    text = DOCS.read_text()
    documented = re.findall(r"^## PLAIT-(E\d{3})", text, flags=re.M)
    assert len(documented) == len(set(documented))
    assert sorted(documented) == sorted(CATALOGUE)


def test_messages_lead_with_their_code():
    assert str(PlaitError("E017", "unknown run id 'x'")).startswith("PLAIT-E017 ")
