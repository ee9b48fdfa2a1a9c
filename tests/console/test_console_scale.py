"""The console at scale: 10,000 runs and a run of 20,000 journal items. Each view's data
comes in one paged request, and the page holds one page of rows, not the store."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from console.support import Console, fill_served
from serve_driver.support import copy_flows, served

RUNS = 10_000
ITEMS = 20_000


def api_requests(tab: Console, path: str) -> list[str]:
    """The URLs of the API requests the tab makes to paths matching ``path`` (a regex)."""
    seen: list[str] = []

    def record(request: Any) -> None:
        if re.fullmatch(path, urlsplit(request.url).path):
            seen.append(request.url)

    tab.page.on("request", record)
    return seen


def test_ten_thousand_runs_and_a_long_journal_stay_paged(tmp_path: Path, console_for: Any):
    copy_flows(tmp_path)
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with served(tmp_path, db, "--workers", "0") as server:
        big = fill_served(server, db, RUNS, ITEMS)
        tab: Console = console_for(server)
        page = tab.page

        listed = api_requests(tab, "/runs")
        tab.open("runs")
        page.locator("#runs tr").nth(49).wait_for()
        assert page.locator("#runs tr").count() == 50  # one page, not 10,001 rows
        assert listed and all(parse_qs(urlsplit(u).query)["limit"] == ["50"] for u in listed)
        first_ids = page.locator("#runs tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
        page.click("text=Next page")
        page.wait_for_url(re.compile(r"cursor="))
        page.locator(f"#runs tr[data-run-id='{first_ids[0]}']").wait_for(state="detached")
        page.locator("#runs tr").nth(49).wait_for()
        second_ids = page.locator("#runs tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
        assert not set(first_ids) & set(second_ids)
        assert page.locator("#runs tr").count() == 50
        tab.shot("runs-10000")

        journal = api_requests(tab, "/runs/[^/]+/journal")
        tab.open(f"runs/{big}")
        page.locator("#timeline .effect").first.wait_for()
        assert len(journal) == 1  # the newest page only
        assert 0 < page.locator("#timeline .effect").count() <= 100  # 200 items: 100 effects
        page.locator("#load-older").scroll_into_view_if_needed()
        page.locator("#timeline .effect").nth(100).wait_for()  # the next page, on scroll
        assert len(journal) >= 2 and "before=" in journal[1]
        assert page.locator("#timeline .effect").count() <= 400
        tab.shot("journal-20000")

        tab.open(f"runs/{big}#superstep-96")
        page.locator("#superstep-96").wait_for()
        assert page.locator("#timeline .effect").count() < ITEMS // 4
