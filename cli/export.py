"""``driftdesk export RUN --format atif [--out DIR]``: a run's trajectories in a format other
tools read (``analysis.atif_export``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from driftdesk.cli.errors import ANALYSIS_INPUT_ERRORS, guarded
from driftdesk.terminal import printable, printable_path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a run's trajectories for other tools (ATIF, Harbor's format)",
        description="Write each attempt's trajectory (its final try; earlier tries in the "
        "root extra) as ATIF-v1.8 to OUT/<task folder>__<attempt>/agent/trajectory.json, with "
        "OUT/index.json listing them. Exit 0; 2 for an unknown run; 1 when no attempt kept a "
        "trajectory.",
    )
    p.add_argument("run", metavar="RUN", help="a run dir")
    p.add_argument("--format", default="atif", choices=["atif"], help="atif (the only one)")
    p.add_argument("--out", metavar="DIR", help="where to write (default ./<run id>-atif)")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    return guarded(_export, ANALYSIS_INPUT_ERRORS)(args)


def _export(args: argparse.Namespace) -> int:
    from driftdesk.analysis.atif_export import export_atif
    from driftdesk.analysis.sources import SourceError

    run_dir = Path(args.run)
    if not (run_dir / "manifest.json").is_file():
        raise SourceError(f"{run_dir}: not a run dir (no manifest.json)")
    out = Path(args.out) if args.out else Path(f"{run_dir.resolve().name}-atif")
    result = export_atif(run_dir, out)
    for problem in result.problems:
        print(printable(f"warning: {problem}"), file=sys.stderr)
    if result.without_trajectory:
        shown = ", ".join(f"{t}#{a}" for t, a in result.without_trajectory[:5])
        more = len(result.without_trajectory) - 5
        print(
            printable(
                f"{len(result.without_trajectory)} attempts kept no trajectory: {shown}"
                + (f" … (+{more})" if more > 0 else "")
            ),
            file=sys.stderr,
        )
    print(f"wrote {len(result.written)} ATIF trajectories to {printable_path(out)}")
    return 0 if result.written else 1
