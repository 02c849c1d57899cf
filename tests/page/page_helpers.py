"""Helpers of the page tests: the page's data block read back, the CLI in a session's home, a
page opened in Chromium with its console messages and requests recorded."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The profiles' keys: shaped like no provider's key, so only the value-level scrub (the key
# read from the keyring) can find them; the key-shaped scrub is tested with SHAPED_KEY.
KEY = "pagekey-7Hq2LmZx9Wv4Tt0RpL3nQ8"
OTHER_KEY = "otherkey-Jd83KsLq0PzXw2Nv5Rb7"
SHAPED_KEY = "sk-proj-Zq81XkW3mN7vB2cR9tY4uI6oP0aS5dF"
CHROMIUM = "/usr/bin/chromium"
# Chromium's own connections (updates, sync, field trials) are refused by a closed network and
# would be requests the page did not make; these flags keep it quiet.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_DATA_BLOCK = re.compile(
    r'<script type="application/json" id="driftdesk-data">(.*?)</script>', re.DOTALL
)


@dataclass
class PageEnv:
    root: Path
    env: dict[str, str]
    run_a: Path
    run_b: Path
    no_bodies: Path
    faulty: Path  # link errors surfaced past the retries

    def cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "driftdesk", *args],
            capture_output=True, text=True, env=self.env, timeout=timeout, cwd=self.root,
        )  # fmt: skip

    def page(self, *args: str) -> tuple[str, Path]:
        """``driftdesk ARGS --format html --out FILE``: the page's text and its path."""
        out = self.root / f"page-{abs(hash(args))}.html"
        result = self.cli(*args, "--format", "html", "--out", str(out))
        assert result.returncode == 0, result.stderr
        return out.read_text(encoding="utf-8"), out

    def json(self, *args: str) -> Any:
        result = self.cli(*args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


def page_data(html: str) -> dict[str, Any]:
    """The page's JSON block, read back (its ``\\u003c`` escapes are JSON's own)."""
    found = _DATA_BLOCK.findall(html)
    assert len(found) == 1, "one data block"
    return json.loads(found[0])  # type: ignore[no-any-return]


@dataclass
class Opened:
    page: Any
    problems: list[str] = field(default_factory=list)  # console errors/warnings, page errors
    requests: list[str] = field(default_factory=list)


def open_page(browser: Any, path: Path, width: int = 1280, height: int = 900) -> Opened:
    """``path`` in a fresh browser context, once its script has run; every request and every
    console error or warning recorded from the start."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    opened = Opened(page)
    page.on(
        "console",
        lambda m: (
            opened.problems.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda e: opened.problems.append(f"pageerror: {e}"))
    page.on("dialog", lambda d: (opened.problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", lambda r: opened.requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready]", timeout=15_000)
    return opened


def plant(run_dir: Path, words: str) -> None:
    """``words`` into every recorded call (the prompt and the answer), every transcript, a
    failed attempt's error message, and the manifest's base URL (as user info and query)."""
    for recording in run_dir.glob("attempts/*/*.calls.jsonl.gz"):
        records = [
            json.loads(line) for line in gzip.decompress(recording.read_bytes()).splitlines()
        ]
        for record in records:
            for item in record["request"]["items"]:
                if isinstance(item.get("content"), str):
                    item["content"] += " " + words
            if record.get("response") and isinstance(record["response"].get("text"), str):
                record["response"]["text"] += " " + words
        text = "".join(json.dumps(r) + "\n" for r in records)
        recording.write_bytes(gzip.compress(text.encode()))
    for transcript in run_dir.glob("attempts/*/*.transcript.json"):
        messages = json.loads(transcript.read_text())
        for message in messages:
            if isinstance(message.get("content"), str):
                message["content"] += " " + words
        transcript.write_text(json.dumps(messages))
    rows = (run_dir / "attempts.jsonl").read_text().splitlines()
    failed = next(i for i, line in enumerate(rows) if '"outcome":"fail"' in line)
    row = json.loads(rows[failed])
    row["error_message"] = f"the harness said: {words}"
    rows[failed] = json.dumps(row, separators=(",", ":"))
    (run_dir / "attempts.jsonl").write_text("\n".join(rows) + "\n")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    url = urllib.parse.urlsplit(manifest["base_url"])
    manifest["base_url"] = f"http://user:{KEY}@{url.netloc}{url.path}?api_key={KEY}#{KEY}"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
