"""``driftdesk cache info|clear [RUN_DIR ...]``: the caches of derived data, listed or deleted.

The caches listed are the ones declared in ``analysis.cache_store`` (found by
``analysis.cache_places``); why deleting them changes no figure: there. To compute one
command's figures without them, ``driftdesk --no-cache ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from driftdesk.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="list or delete the caches that make reports fast the second time",
        description="The caches of derived data: each run's typed rows and trend figures "
        "(beside it, or under the user's cache dir for a read-only run), the kept reports and "
        "trends, the workbench's measured successes. Deleting any of them changes no figure: "
        "the next read makes it again. Without RUN_DIR: the user's cache dir and the runs "
        "under --runs (default ./runs); with: those runs' caches, and the kept reports and "
        "trends that name them. `driftdesk --no-cache COMMAND` reads and keeps none.",
    )
    p.add_argument("action", choices=["info", "clear"], help="info: list them; clear: delete them")
    p.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR", help="only these runs")
    p.add_argument("--runs", type=Path, metavar="DIR", help="the folder of runs (default: ./runs)")
    p.add_argument("--json", action="store_true", help="info: the caches as JSON")
    p.set_defaults(func=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    from driftdesk.analysis import cache_places
    from driftdesk.paths import runs_dir

    for run_dir in args.run_dirs:
        if not run_dir.is_dir():
            print(f"driftdesk cache: {printable(str(run_dir))}: not a run dir", file=sys.stderr)
            return 2
    if args.run_dirs:
        caches = cache_places.of_runs(args.run_dirs)
    else:
        folder = args.runs or runs_dir()
        caches = cache_places.without_nested(
            cache_places.of_user() + cache_places.of_runs(cache_places.in_runs_folder(folder))
        )
    if args.action == "clear":
        done = cache_places.clear(caches)
        print(f"removed {done.caches} caches: {done.files} files, {_size(done.size)}")
        for path, why in done.failed:
            print(printable(f"driftdesk cache: {path}: not removed: {why}"), file=sys.stderr)
        return 1 if done.failed else 0
    if args.json:
        print(json.dumps([cache.to_json() for cache in caches], indent=2))
        return 0
    if not caches:
        print("no caches")
        return 0
    width = max(len(cache.what) for cache in caches)
    for cache in caches:
        print(
            f"{printable(cache.what):<{width}}  {_size(cache.size):>9}  {cache.files:>6} files  "
            f"{printable(str(cache.path))}"
        )
    total = sum(cache.size for cache in caches)
    print(f"{'total':<{width}}  {_size(total):>9}  {sum(c.files for c in caches):>6} files")
    return 0


def _size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
