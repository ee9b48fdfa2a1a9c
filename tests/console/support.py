"""Helpers of the browser tests: Debian's Chromium driven by Playwright, against a real
``plait serve`` (``serve_driver.support.served``) on a real SQLite store.

Chromium is ``/usr/bin/chromium`` (Playwright's own browser download is not used). Without
it, or without Playwright, the tests skip saying why; with ``PLAIT_REQUIRE_BROWSER=1``
(``.ci/run`` sets it) they fail instead. Waiting is Playwright's own waiting for what the
page shows, under a generous deadline, never a sleep.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from plait.core.keys import JournalKey
from plait.store import open_store
from plait.store.records import IntentWrite, ResultWrite, RunInfo, StatusWrite
from serve_driver.support import TOKEN, Served

CHROMIUM = Path("/usr/bin/chromium")
WAIT_MS = 60_000
"""How long a browser step may wait for what it expects (a loaded machine is slow)."""


def browser_or_skip() -> Any:
    """A launched Chromium, or a skip (a failure under PLAIT_REQUIRE_BROWSER=1)."""
    required = os.environ.get("PLAIT_REQUIRE_BROWSER") == "1"
    why = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "playwright is not installed (pip install -e '.[dev]')"
    if why is None and not CHROMIUM.exists():
        why = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    if why is not None:
        if required:
            pytest.fail(f"PLAIT_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    return sync_playwright


class Console:
    """One browser tab on one server's console, signed in with its token."""

    def __init__(self, page: Any, server: Served, shots: Path) -> None:
        self.page = page
        self.server = server
        self.shots = shots
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.set_default_timeout(WAIT_MS)

    def open(self, path: str) -> None:
        """Go to ``/console/PATH``, signing in first when the tab has no token yet."""
        self.page.goto(self.server.url.rstrip("/") + "/console/" + path)
        if self.page.locator("#login").is_visible():
            self.page.fill("#token", TOKEN)
            self.page.press("#token", "Enter")

    def shot(self, name: str) -> Path:
        """A screenshot under the test's output folder."""
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def horizontal_overflow(self) -> int:
        return int(self.page.evaluate("document.documentElement.scrollWidth - innerWidth"))


def fill_served(server: Served, db: str, runs: int, journal_items: int) -> str:
    """``fill_store`` for ``server``'s store, with the manifest of a real run of the
    approval workflow it starts first (``seed``); the big run's id."""
    server.post("/runs", {"workflow": server.flow("approval"), "run_id": "seed"})
    store = open_store(db)
    try:
        manifest = store.manifests("seed")[0]
    finally:
        store.close()
    return fill_store(db, manifest, runs, journal_items)


def fill_store(db: str, manifest: dict[str, Any], runs: int, journal_items: int) -> str:
    """``runs`` finished runs of ``manifest``'s workflow and one run with ``journal_items``
    journal items (tool effects, each an intent and its result), written through the
    store's own API; the big run's id."""
    store = open_store(db)
    try:
        base = 1_700_000_000_000
        for i in range(runs):
            info = RunInfo(f"bulk-{i:05d}", "bulk", "completed", "carol", None, base + i, base + i)
            store.create_run(info, manifest)
        big = "big-journal"
        store.create_run(RunInfo(big, "bulk", "running", "carol", None, base, base), manifest)
        writes: list[Any] = []
        for n in range(journal_items // 2):
            key = JournalKey(big, "", "work", 1, n, "tool")
            step = 1 + n // 100
            writes.append(IntentWrite(key, "work", {"n": n}, step, base + n, f"k{n}"))
            writes.append(ResultWrite(key, {"Completed": {"result": {"n": n}}}, base + n + 1, 10))
            if len(writes) >= 2000:
                store.commit(big, None, writes)
                writes = []
        store.commit(big, None, [*writes, StatusWrite("completed", "Completed", base + 99)])
        return big
    finally:
        store.close()
