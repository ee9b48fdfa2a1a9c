"""``make screenshot``: docs/console.png, the console on a parked run (README, console.md).

Runs a real ``plait serve`` on a fresh store in a temporary folder with the
human-in-the-loop test workflows, parks a run on its approval, and photographs the run's
view at 1280x720 in Debian's Chromium.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from console.support import CHROMIUM, Console
from serve_driver.support import copy_flows, served


def main(out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        copy_flows(folder)
        with served(folder, f"sqlite:///{folder / 'runs.db'}", "--workers", "1") as server:
            for i in range(3):
                server.start("loop", f"nightly-{i}")
            server.start("approval", "release-42")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), args=["--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1280, "height": 720})
                tab = Console(page, server, folder)
                tab.open("runs/release-42")
                page.locator("#graph [data-node='approve']").wait_for()
                page.locator("#timeline .effect").first.wait_for()
                page.locator("#stream-state", has_text="ended").wait_for()
                page.screenshot(path=str(out))
                browser.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/console.png").resolve())
