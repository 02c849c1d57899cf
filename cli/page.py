"""``--format html --out FILE`` of report, compare and trend: the shareable page
(``analysis.page``), and the run's key handed to its scrubber.

The key is read here, in a face: the cores never open the keyring. A run whose profile has no
key stored (or a keyring that cannot answer) gets a page scrubbed of anything that looks like a
key, as the run dir's files already are.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from driftdesk.terminal import printable_path


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


def secrets_of(profile: str | None) -> Sequence[str]:
    """The key of ``profile`` from the keyring, to scrub from the page; none when it has none."""
    if not profile:
        return ()
    from driftdesk.providers.keys import get_key

    try:
        return (get_key(profile),)
    except Exception:  # no key, no keyring, a locked one: the key-shaped scrub still applies
        return ()


def options(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from driftdesk.analysis.page.build import PageOptions

    return PageOptions(
        drop_content=bool(getattr(args, "redact_content", False)), secrets_of=secrets_of
    )


def write(html: str, out: str) -> None:
    from driftdesk.analysis.page.build import write_page

    write_page(html, out)
    print(
        f"wrote {printable_path(out)} ({len(html.encode('utf-8')) / 1e6:.1f} MB)", file=sys.stderr
    )
