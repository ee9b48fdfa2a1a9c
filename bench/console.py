"""The console at scale, in Chromium: time to interactive of the runs list and of a run.

Two real ``plait serve`` processes, each on its own fresh SQLite store: a *small* store
(10 runs, one of them with 400 journal items: two pages, so both stores draw a full first
page and only the store's size differs) and a *large* one (10,000 runs, one of them
with 100,000 journal items; ``--items`` changes it), filled through the store's own API
(``tests/console/support.fill_store``). For each store, Debian's Chromium (through
Playwright, token preset in the tab) opens:

- **runs list**: ``/console/runs`` until its 10th row is shown (the store's newest page);
- **run view**: ``/console/runs/ID`` of the long run until its timeline shows an effect
  and its graph a node.

Each is the median of ``--repeat`` fresh tabs. The figure that matters is the ratio of
the large store to the small one: the console reads one page whatever the size.

Beside it, the API requests those views make against the ones the console made before
(the whole runs list, the whole trace), on the large store, in the same run:
``GET /runs?limit=50`` vs ``GET /runs``, ``GET /runs/ID/journal?limit=200`` vs
``GET /runs/ID/trace``.

    .venv/bin/python bench/console.py [--items N] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from console.support import CHROMIUM, fill_served
from serve_driver.support import TOKEN, copy_flows, served

BIG = "big-journal"
SMALL_ITEMS = 400
"""The small store's long run: two pages of journal, so both views draw a full first page."""


def median_s(work: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_store(
    folder: Path, runs: int, items: int, repeat: int, browser: Any
) -> dict[str, float]:
    folder.mkdir(parents=True)
    copy_flows(folder)
    db = f"sqlite:///{folder / 'runs.db'}"
    with served(folder, db, "--workers", "0") as server:
        fill_served(server, db, runs, items)
        base = server.url.rstrip("/") + "/console/"

        def tab(path: str, ready: Callable[[Any], None]) -> Callable[[], None]:
            def work() -> None:
                context = browser.new_context(viewport={"width": 1280, "height": 720})
                context.add_init_script(f"sessionStorage.setItem('plait.token', '{TOKEN}')")
                page = context.new_page()
                page.set_default_timeout(300_000)
                page.goto(base + path)
                ready(page)
                context.close()

            return work

        out = {
            "list": median_s(
                tab("runs", lambda p: p.locator("#runs tr").nth(9).wait_for()), repeat
            ),
            "run": median_s(
                tab(
                    f"runs/{BIG}",
                    lambda p: (
                        p.locator("#timeline .effect").first.wait_for(),
                        p.locator("#graph [data-node]").first.wait_for(),
                    ),
                ),
                repeat,
            ),
        }
        if runs > 100:
            for name, path in (
                ("api page of runs", "/runs?limit=50"),
                ("api every run", "/runs"),
                ("api journal page", f"/runs/{BIG}/journal?limit=200"),
                ("api whole trace", f"/runs/{BIG}/trace"),
            ):
                out[name] = median_s(lambda path=path: server.get(path).raise_for_status(), repeat)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as tmp:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        small = measure_store(Path(tmp) / "small", 10, SMALL_ITEMS, args.repeat, browser)
        large = measure_store(Path(tmp) / "large", args.runs, args.items, args.repeat, browser)
        browser.close()
    print(f"console time to interactive (median of {args.repeat}, Chromium, SQLite)")
    print(
        f"  runs list: {small['list'] * 1000:8.1f} ms at 10 runs, "
        f"{large['list'] * 1000:8.1f} ms at {args.runs} runs: x{large['list'] / small['list']:.2f}"
    )
    print(
        f"  run view:  {small['run'] * 1000:8.1f} ms at {SMALL_ITEMS} items, "
        f"{large['run'] * 1000:8.1f} ms at {args.items} items: x{large['run'] / small['run']:.2f}"
    )
    print(f"API on the large store (median of {args.repeat})")
    for paged, whole in (
        ("api page of runs", "api every run"),
        ("api journal page", "api whole trace"),
    ):
        print(
            f"  {paged}: {large[paged] * 1000:8.1f} ms; {whole}: {large[whole] * 1000:8.1f} ms"
            f" (x{large[whole] / large[paged]:.1f} slower)"
        )


if __name__ == "__main__":
    main()
