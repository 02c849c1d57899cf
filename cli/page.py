"""``--format html --out FILE`` of report, compare and trend: the shareable page
(``analysis.page``), and the run's key handed to its scrubber.

The run's key comes from the keyring (``providers.page_keys``) through here, a face: the page's
core never opens the keyring.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from driftdesk.terminal import printable_path

if TYPE_CHECKING:
    from driftdesk.analysis.page.build import PageOptions


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--redact-content",
        action="store_true",
        help="html: leave prompts, answers and tool arguments out of the page (steps keep "
        "their kind, tool names and sizes)",
    )


def needs_out(args: argparse.Namespace) -> bool:
    """True (and says so) when ``--format html`` comes without ``--out``."""
    if args.format == "html" and not args.out:
        print("driftdesk: --format html needs --out FILE", file=sys.stderr)
        return True
    return False


def options(args: argparse.Namespace) -> PageOptions:
    from driftdesk.analysis.page.build import PageOptions
    from driftdesk.providers.page_keys import keys_to_scrub

    drop = bool(getattr(args, "redact_content", False))
    return PageOptions(drop_content=drop, secrets_of=keys_to_scrub)


def write(html: str, out: str) -> None:
    from driftdesk.analysis.page.build import write_page

    write_page(html, out)
    print(
        f"wrote {printable_path(out)} ({len(html.encode('utf-8')) / 1e6:.1f} MB)", file=sys.stderr
    )
