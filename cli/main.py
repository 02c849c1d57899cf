"""The ``driftdesk`` command line: a thin face over the cores.

Each area registers its sub-commands from ``cli/<area>.py`` (``register``);
handlers import their core lazily so ``driftdesk key NAME`` (run by Claude Code and Codex on
every key refresh) starts fast and never imports Textual. Only ``driftdesk`` with no
sub-command, ``driftdesk tui`` and ``driftdesk demo`` load the TUI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from driftdesk import __version__

PROFILE_IMPORT_SOURCES = ("claude", "codex", "env")


def build_parser() -> argparse.ArgumentParser:
    from driftdesk.cli import analysis, profiles, runs, workbench

    parser = argparse.ArgumentParser(
        prog="driftdesk",
        description="Pin provider configs, rerun agent suites, see per-task volatility.",
    )
    parser.add_argument("--version", action="version", version=f"driftdesk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    profiles.register(sub)
    runs.register(sub)
    analysis.register(sub)
    workbench.register(sub)
    _register_import(sub)
    return parser


def _register_import(sub: argparse._SubParsersAction) -> None:
    # One verb, two jobs: `import claude|codex|env` turns a live config into a profile;
    # `import PATH` turns another harness's results into a driftdesk run dir.
    p = sub.add_parser(
        "import",
        help="import a config as a profile (claude|codex|env) or foreign results as a run",
        description=(
            "driftdesk import claude|codex|env [PATH] --name NAME  -> a provider profile\n"
            "driftdesk import RESULTS_PATH [--format ...] [--out DIR] -> a run dir"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", help="claude, codex, env, or a results file")
    p.add_argument("path", nargs="?", help="config file to read (profile import)")
    g = p.add_argument_group("profile import")
    g.add_argument("--name", help="profile name to create")
    g.add_argument("--scope", choices=["user", "project"], default="user")
    g.add_argument(
        "--move-key",
        action="store_true",
        help="after storing the key in the keyring, remove it from the file (backed up first)",
    )
    g.add_argument("--yes", "-y", action="store_true", help="answer yes to prompts")
    r = p.add_argument_group("results import")
    r.add_argument(
        "--format", default="auto", choices=["auto", "jsonl", "tau-bench", "tau2", "appworld"]
    )
    r.add_argument("--task-field")
    r.add_argument("--success-field")
    r.add_argument("--score-threshold", type=float, default=1.0)
    r.add_argument("--out", default="runs", help="folder for the new run dir (default ./runs)")
    r.add_argument("--run-id", help="run id to give the imported results")
    p.set_defaults(func=_dispatch_import)


def _dispatch_import(args: argparse.Namespace) -> int:
    if args.source in PROFILE_IMPORT_SOURCES:
        from driftdesk.cli.profiles import cmd_import_profile

        return cmd_import_profile(args)
    from driftdesk.cli.analysis import cmd_import_results

    return cmd_import_results(args)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if len(words) == 2 and words[0] == "key" and not words[1].startswith("-"):
        # The key helper's hot path (Claude Code / Codex run it on every key refresh): building
        # the whole parser costs more than reading the key.
        from driftdesk.cli.profiles import cmd_key

        func: Callable[[argparse.Namespace], int] | None = cmd_key
        args = argparse.Namespace(command="key", name=words[1])
    else:
        parser = build_parser()
        args = parser.parse_args(argv)
        func = getattr(args, "func", None)
    if func is None:
        from driftdesk.cli.workbench import open_workbench

        return open_workbench()
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
