"""The workbench's ``e``: what is on screen as the shareable page (``analysis.page``), one HTML
file in the export folder. A worker calls these (they read runs and draw plots); the run's key
comes from the keyring for the page's scrubber, as the CLI's ``--format html`` does."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.rundir import safe_name

if TYPE_CHECKING:
    from driftdesk.analysis.page.build import PageOptions


def page_options() -> PageOptions:
    from driftdesk.analysis.page.build import PageOptions
    from driftdesk.providers.page_keys import keys_to_scrub

    return PageOptions(secrets_of=keys_to_scrub)


def _write(html: str, out_dir: Path, name: str) -> Path:
    from driftdesk.analysis.page.build import write_page

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{safe_name(name)}.html"
    write_page(html, path)
    return path


def run_page(run_dir: Path, out_dir: Path) -> Path:
    """The page of one run (``report RUN --format html``) as ``<run id>.html``."""
    from driftdesk.analysis.page.build import report_page

    html = report_page([str(run_dir)], page_options(), lambda _line: None)
    return _write(html, out_dir, run_dir.name)


def task_link(page: Path, task_id: str) -> str:
    """The page's address that opens ``task_id`` (the page reads ``#task=<id>``)."""
    from urllib.parse import quote

    return f"{page.resolve().as_uri()}#task={quote(task_id, safe='')}"


def compare_page(comparison: Any, out_dir: Path) -> Path:
    """The page of a comparison as ``<A>-vs-<B>.html``."""
    from driftdesk.analysis.page.build import compare_page as make

    name = f"{comparison.a.run_id}-vs-{comparison.b.run_id}"
    return _write(make(comparison, page_options()), out_dir, name)


def trend_page(trend: Any, out_dir: Path) -> Path:
    """The page of a trend as ``trend-<suite>.html``."""
    from driftdesk.analysis.page.build import trend_page as make

    return _write(make(trend.to_json(), page_options()), out_dir, f"trend-{trend.suite or 'suite'}")
