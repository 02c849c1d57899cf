"""Regenerate the README's screenshots of the shareable page (``report/compare/trend --format
html``): two runs of the basic suite × 5 made by the real engine against the sandbox (faults
injected), their pages opened in Debian's headless Chromium (Playwright) at a fixed size.

    .venv-test/bin/python screenshots/make_page_screenshots.py

Everything happens in a throwaway home; the runs' keys are fake and never reach a page.
Writes page-report.png (headline, identity, plots), page-tasks.png (the task table and a
volatile task's pass beside a fail), page-compare.png and page-trend.png.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
WIDTH = 1280
# The profile's key for the two runs: made here, never written down (the page scrubs it anyway).
SCREENSHOT_KEY = "sk-" + secrets.token_hex(16)


def _page(*args: str, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "driftdesk", *args, "--format", "html", "--out", str(out)],
        check=True,
    )
    return out


def main() -> int:
    from playwright.sync_api import sync_playwright

    root = Path(tempfile.mkdtemp(prefix="driftdesk-page-shots-"))
    os.environ["HOME"] = str(root)
    for name in [n for n in os.environ if n.startswith(("XDG_", "DRIFTDESK_"))]:
        del os.environ[name]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.sandbox_runs import faulted_basic_run

    runs = root / "runs"
    a = faulted_basic_run(runs, server_seed=3, api_key=SCREENSHOT_KEY)
    b = faulted_basic_run(runs, server_seed=11, api_key=SCREENSHOT_KEY)
    report = _page("report", str(a), out=root / "report.html")
    compare = _page("compare", str(a), str(b), out=root / "compare.html")
    trend = _page("trend", str(runs), out=root / "trend.html")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready]")
        page.screenshot(path=str(HERE / "page-report.png"))
        page.check('input[data-toggle="volatile"]')
        page.click("button.task >> nth=0")
        page.locator("section.run-tasks").scroll_into_view_if_needed()
        page.locator("section.run-tasks").screenshot(path=str(HERE / "page-tasks.png"))
        for path, name in ((compare, "page-compare.png"), (trend, "page-trend.png")):
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-ready]")
            page.screenshot(path=str(HERE / name))
        browser.close()
    print("wrote page-report.png, page-tasks.png, page-compare.png, page-trend.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
