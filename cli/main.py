"""The ``driftdesk`` command line: a thin face over the cores.

Each area registers its sub-commands from ``cli/<area>.py`` (``register``);
handlers import their core lazily so ``driftdesk key NAME`` (run by Claude Code and Codex on
every key refresh) starts fast and never imports Textual. Only ``driftdesk`` with no
sub-command, ``driftdesk tui`` and ``driftdesk demo`` load the TUI.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from driftdesk import __version__

PROFILE_IMPORT_SOURCES = ("claude", "codex", "env")


def build_parser() -> argparse.ArgumentParser:
    from driftdesk.cli import (
        analysis,
        cache,
        ctl,
        explain,
        export,
        profiles,
        runs,
        storage,
        trend,
        workbench,
    )

    parser = argparse.ArgumentParser(
        prog="driftdesk",
        description="Pin provider configs, rerun agent suites, see per-task volatility.",
        epilog=(
            "exit codes: 0 done; 1 the command was understood but failed (a check below its "
            "threshold, a keyring that refused, a run that did not complete); 2 usage or bad "
            "input (wrong arguments, an unknown or invalid profile, an unreadable suite); "
            "3 a run whose every attempt was a link error; 4 a run whose harness broke every "
            "attempt; 130 interrupted"
        ),
    )
    parser.add_argument("--version", action="version", version=f"driftdesk {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the full traceback of an unexpected error (also DRIFTDESK_DEBUG=1; "
        "accepted anywhere before a `--`)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="compute every figure from the runs' files, reading and keeping no cache (a "
        "run's typed rows, kept reports, trends); also DRIFTDESK_NO_CACHE=1; accepted "
        "anywhere before a `--`",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    profiles.register(sub)
    runs.register(sub)
    ctl.register(sub)
    analysis.register(sub)
    trend.register(sub)
    explain.register(sub)
    export.register(sub)
    cache.register(sub)
    workbench.register(sub)
    storage.register(sub)
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
            "driftdesk import RESULTS_PATH [--format ...] [--out DIR] [--copy] -> a run dir\n"
            "driftdesk import MOVED_PATH --relink RUN_DIR  -> a zero-copy run reads it there"
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
        "--format",
        default="auto",
        choices=["auto", "jsonl", "tau-bench", "tau2", "appworld", "inspect", "harbor"],
        help="inspect: inspect_ai .eval/.json logs, a file or a folder (auto-detected); "
        "harbor: a Harbor job dir or a folder of jobs (auto-detected)",
    )
    r.add_argument(
        "--merge",
        action="store_true",
        help="harbor: one run per agent, model and dataset across the jobs (a task's trials "
        "from every job are its attempts) instead of one run per job",
    )
    r.add_argument(
        "--task-field",
        metavar="NAME",
        help="JSONL: the field holding the task id (default: task_id, else task)",
    )
    r.add_argument(
        "--success-field",
        metavar="NAME",
        help="JSONL: the field holding the verdict, true/false or 1/0 (default: success, pass "
        "or passed, else score or reward against --score-threshold); named, a record without "
        "it is a bad record",
    )
    r.add_argument(
        "--score-threshold",
        type=float,
        default=None,
        metavar="X",
        help="a record judged by its score or reward passes at >= X (default 1.0; inspect "
        "logs: a sample whose score, as inspect reads it, is >= X, default 0.5)",
    )
    r.add_argument("--out", default="runs", help="folder for the new run dir (default ./runs)")
    r.add_argument("--run-id", help="run id to give the imported results")
    r.add_argument(
        "--max-member-mb",
        type=int,
        metavar="MB",
        help="inspect .eval logs: refuse a log whose member (a sample, the header) decompresses "
        "to more than MB MiB (default 512; a zip bomb is refused before it is read)",
    )
    r.add_argument(
        "--copy",
        action="store_true",
        help="JSONL: write the mapped rows into the run dir (self-contained) instead of "
        "reading the source file in place (zero-copy, the default)",
    )
    r.add_argument(
        "--relink",
        metavar="RUN_DIR",
        help="a zero-copy run's source was moved: point RUN_DIR at it (same content only)",
    )
    p.set_defaults(func=_dispatch_import)


def _dispatch_import(args: argparse.Namespace) -> int:
    if args.source in PROFILE_IMPORT_SOURCES:
        from driftdesk.cli.key_doctor_import import cmd_import_profile

        return cmd_import_profile(args)
    from driftdesk.cli.analysis import cmd_import_results

    return cmd_import_results(args)


def _global_flag(argv: list[str], flag: str) -> tuple[list[str], bool]:
    """``flag`` anywhere before a ``--`` (users add it to the end of the line that failed)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    head = [a for a in argv[:cut] if a != flag]
    return head + argv[cut:], len(head) != cut


def _quiet_stdout() -> None:
    """The reader went away (``| head``): send what is left to /dev/null, so neither this
    write nor the interpreter's final flush raises again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


# Commands that read or control runs (their dirs, caches, the workbench over them): refused
# to a harness, which a run marks with DRIFTDESK_RUN_CHILD (the real key is refused there too).
_RUN_COMMANDS = frozenset(
    {"run", "resume", "report", "compare", "check", "tasks", "plot", "trend", "explain"}
    | {"cache", "tui", "demo", "import", "push", "pull", "ctl"}
)


_RUN_CHILD_ENV = "DRIFTDESK_RUN_CHILD"  # reruns.command_agent.RUN_CHILD_ENV, without its import


def _refused_in_run_child(args: argparse.Namespace) -> str | None:
    command = getattr(args, "command", None)
    if _RUN_CHILD_ENV not in os.environ or (command is not None and command not in _RUN_COMMANDS):
        return None
    return (
        f"`driftdesk {command or 'tui'}` is refused here: {_RUN_CHILD_ENV} is set, so this "
        "process was started by a driftdesk run, and a harness reads and controls no run's "
        "files (its own attempt's files are all it gets)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args_list, debug = _global_flag(list(sys.argv[1:] if argv is None else argv), "--debug")
    debug = debug or os.environ.get("DRIFTDESK_DEBUG") == "1"
    args_list, no_cache = _global_flag(args_list, "--no-cache")
    if no_cache:  # for this process and what it starts (the workbench's runs' reports too)
        os.environ["DRIFTDESK_NO_CACHE"] = "1"
    func: Callable[[argparse.Namespace], int] | None
    if len(args_list) == 2 and args_list[0] == "key" and not args_list[1].startswith("-"):
        # The key helper's hot path (Claude Code / Codex run it on every key refresh): building
        # the whole parser costs more than reading the key.
        from driftdesk.cli.key_doctor_import import cmd_key

        func = cmd_key
        args = argparse.Namespace(command="key", name=args_list[1])
    else:
        args = build_parser().parse_args(args_list)
        func = getattr(args, "func", None)
    refused = _refused_in_run_child(args)
    if refused:
        from driftdesk.terminal import printable

        print(printable(f"driftdesk: error: {refused}"), file=sys.stderr)
        return 1
    if func is not None and (args.command == "resume" or any("://" in a for a in args_list)):
        # a URL where a run dir or folder goes: read in place, published, or refused (and a
        # staged run resumed is published again)
        from driftdesk.cli.storage import place_urls

        placed = place_urls(args, args_list)
        if placed is not None:
            return placed
        func = args.func
    try:
        if func is None:
            from driftdesk.cli.workbench import open_workbench

            code = open_workbench()
        else:
            code = int(func(args) or 0)
        sys.stdout.flush()  # here, where a closed pipe can still be caught
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except Exception as exc:
        # The one place an unexpected error becomes a sentence instead of a traceback.
        if debug:
            raise
        from driftdesk.secrets import redact
        from driftdesk.terminal import printable

        message = redact(str(exc)).strip() or type(exc).__name__
        print(printable(f"driftdesk: error: {message}"), file=sys.stderr)
        print(
            "(this was not expected; `driftdesk --debug ...` shows where it came from)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
