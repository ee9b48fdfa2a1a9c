"""Fixtures of the browser tests: one Chromium per module, a fresh 1280x720 tab per use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.support import CHROMIUM, Console, browser_or_skip
from serve_driver.support import Served


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    starter = browser_or_skip()
    with starter() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def console_for(chromium: Any, tmp_path: Path) -> Iterator[Any]:
    """``console_for(server)``: a fresh 1280x720 tab on ``server``'s console."""
    contexts = []

    def make(server: Served) -> Console:
        context = chromium.new_context(viewport={"width": 1280, "height": 720})
        contexts.append(context)
        return Console(context.new_page(), server, tmp_path / "screenshots")

    yield make
    for context in contexts:
        context.close()
