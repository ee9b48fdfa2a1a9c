"""What an id or a name may hold, checked alike by the plan and by the driver.

Apart from ``core.plan`` so that checking a run id or a principal (every ``Runtime``
does) does not import the plan builder and its condition language.
"""

from __future__ import annotations

import unicodedata


def has_control_character(text: str) -> bool:
    """Whether ``text`` holds a control character: C0 (``\\n``, ``\\t``, NUL ...), DEL or
    C1 (U+0080-U+009F, such as NEL, which ends a line for many readers)."""
    return any(unicodedata.category(ch) == "Cc" for ch in text)
