"""CLI sub-commands that point tools at a profile and undo it: ``switch`` (Claude Code, Codex
or a .env file, edited in place), ``history`` and ``restore`` of those writes, ``status``
(which profile each target points at, and drift) and ``exec`` (one command run with a
profile). Logic lives in ``providers``; errors: ``cli.errors.guarded`` with
``PROVIDER_ERRORS``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from driftdesk.cli.errors import PROVIDER_ERRORS, err, guarded
from driftdesk.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:
    """Add switch, history, restore, status and exec to the top-level parser."""
    p = sub.add_parser(
        "switch",
        help="point Claude Code, Codex or a .env file at a profile (edited in place)",
    )
    p.add_argument("name")
    p.add_argument("--target", required=True, choices=["claude", "codex", "env"])
    p.add_argument(
        "--scope",
        default="user",
        choices=["user", "project", "local"],
        help="claude: user (~/.claude), project (.claude/settings.json) or local "
        "(.claude/settings.local.json); codex: user ($CODEX_HOME) only — Codex ignores a "
        "provider set in a project's .codex/config.toml (use driftdesk exec NAME -- codex)",
    )
    p.add_argument("--env-file", help="the .env file for --target env (default ./.env)")
    p.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    p.add_argument(
        "--force",
        action="store_true",
        help="write the file even if it is read-only (its mode is kept)",
    )
    p.add_argument(
        "--move-key",
        action="store_true",
        help="env: first move a provider key the file holds (OPENAI_API_KEY...) into the OS "
        "keyring, so tools loading the file do not send it to the new endpoint",
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="accepted for scripts written for older versions: a key the switch removes is no "
        "longer refused but warned about, since the backup keeps it (driftdesk restore)",
    )
    p.set_defaults(func=guarded(cmd_switch, PROVIDER_ERRORS))

    def file_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--scope",
            default="user",
            choices=["user", "project", "local"],
            help="claude: user, project or local; codex: user or project",
        )
        p.add_argument("--env-file", help="the .env file for env (default ./.env)")

    p = sub.add_parser(
        "history",
        help="every write driftdesk made to a config file (time, profile, what changed)",
        description="List the writes driftdesk made to Claude Code's settings, Codex's config "
        "or a .env file, numbered for `driftdesk restore --to N`. Without a target: every file "
        "driftdesk has written.",
    )
    p.add_argument("target", nargs="?", choices=["claude", "codex", "env"])
    file_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=guarded(cmd_history, PROVIDER_ERRORS))

    p = sub.add_parser(
        "restore",
        help="put a config file back byte for byte as it was before a driftdesk write",
        description="Put the file back exactly as it was before driftdesk's latest write "
        "(--to last), before write N of `driftdesk history` (--to N), or before driftdesk first "
        "touched it (--to original). Shows the diff, then writes like a switch: the current "
        "file is backed up first and the restore is recorded, so it can be undone in turn.",
    )
    p.add_argument("target", choices=["claude", "codex", "env"])
    file_args(p)
    p.add_argument("--to", default="last", help="last (default), original, or a write number")
    p.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    p.add_argument("--yes", action="store_true", help="restore without asking")
    p.add_argument(
        "--force",
        action="store_true",
        help="write the file even if it is read-only (its mode is kept), e.g. to undo a "
        "switch --force",
    )
    p.set_defaults(func=guarded(cmd_restore, PROVIDER_ERRORS))

    p = sub.add_parser("status", help="which profile each target points at, and drift")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=guarded(cmd_status, PROVIDER_ERRORS))

    p = sub.add_parser(
        "exec",
        help="run a command with the profile's base URL, model and key in its environment",
        usage="driftdesk exec NAME -- CMD [ARGS...]",
        description="Run CMD with the profile's base URL, model and key in its environment. "
        "`-- claude ...` and `-- codex ...` (recognised by the command's name) are pinned "
        "instead: Claude Code gets --settings, Codex gets -c overrides, so that process uses "
        "the profile whatever your settings files say; they fetch the key through "
        "`driftdesk key NAME` and your files are not touched. "
        "Refused when DRIFTDESK_RUN_CHILD is set (inside a driftdesk run's harness).",
    )
    p.add_argument("name")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p.set_defaults(func=guarded(cmd_exec, PROVIDER_ERRORS))


def cmd_switch(args: argparse.Namespace) -> int:
    from driftdesk.providers.profiles import ProfileStore
    from driftdesk.providers.targets import (
        apply_switch,
        plan_switch,
        stale_keys_message,
        unsaved_keys_message,
    )

    _check_scope(args.target, args.scope)
    if args.env_file:
        from pathlib import Path

        from driftdesk.providers.errors import SwitchError

        folder = Path(args.env_file).expanduser().absolute().parent
        if not folder.is_dir():
            raise SwitchError(
                f"--env-file {args.env_file}: the folder {folder} does not exist (a switch "
                "creates no folders); create it first or pick another file"
            )
    from driftdesk.filelock import locked
    from driftdesk.providers import state
    from driftdesk.providers.targets import target_path

    profile = ProfileStore().get(args.name)
    path = target_path(args.target, args.scope, args.env_file)
    # Plan and write under the file's lock: a concurrent switch waits instead of being refused.
    with locked(state.backup_folder(path).name):
        plan = plan_switch(profile, args.target, scope=args.scope, env_file=args.env_file)
        if plan.stale_keys and args.move_key and not args.dry_run:
            from driftdesk.providers.envkeys import move_env_keys

            for done in move_env_keys(plan.path, profile):
                print(printable(f"note: {done}"))
            plan = plan_switch(profile, args.target, scope=args.scope, env_file=args.env_file)
        if plan.diff:
            sys.stdout.write(printable(plan.diff))
        for note in plan.notes:
            print(printable(f"note: {note}"))
        if plan.unsaved_keys:
            err(f"driftdesk: warning: {unsaved_keys_message(plan)}")
        if plan.stale_keys:
            err(f"driftdesk: warning: {stale_keys_message(plan)}")
        if args.dry_run:
            print(printable(f"dry run: {plan.path} not written"))
            return 0
        damaged_before = state.damaged_indexes(plan.path)
        apply_switch(plan, force=args.force)
        if state.damaged_indexes(plan.path) != damaged_before:
            from driftdesk.providers.restore import file_history

            err(f"driftdesk: warning: {file_history(plan.path).damage_warning()}")
    if plan.changed:
        print(printable(f"switched {plan.target} to {profile.name}: wrote {plan.path}"))
    else:
        print(printable(f"{plan.target} already points at {profile.name}: {plan.path} unchanged"))
    return 0


def _check_scope(target: str | None, scope: str) -> None:
    from driftdesk.providers.errors import SwitchError

    if target == "env" and scope != "user":
        raise SwitchError("--scope applies to claude and codex; use --env-file for env")
    if target == "codex" and scope == "local":
        raise SwitchError("codex has user and project scopes only")


def cmd_history(args: argparse.Namespace) -> int:
    from driftdesk.providers.restore import all_histories, file_history
    from driftdesk.providers.targets import target_path

    _check_scope(args.target, args.scope)
    if args.target:
        histories = [file_history(target_path(args.target, args.scope, args.env_file), args.target)]
    else:
        histories = all_histories()
    for history in histories:
        warning = history.damage_warning()
        if warning:
            err(f"driftdesk: warning: {warning}")
    if args.json:
        print(json.dumps([h.to_dict() for h in histories], indent=2, ensure_ascii=False))
        return 0
    if not histories:
        print("driftdesk has not written any config file yet")
    for history in histories:
        print(printable(f"{history.target}  {history.path}"))
        if not history.writes:
            kept = "a copy of the original is kept" if history.has_original else "no backup"
            print(f"  no writes recorded ({kept})")
        for entry in history.writes:
            who = entry.get("profile") or "-"
            print(
                f"  {entry['n']:>3}  {entry.get('at', '?')}  {entry.get('action', 'switch'):<7}  "
                f"{who:<16}  {entry.get('summary', '')}"
            )
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from driftdesk.filelock import locked
    from driftdesk.providers import state
    from driftdesk.providers.restore import apply_restore, plan_restore
    from driftdesk.providers.targets import target_path

    _check_scope(args.target, args.scope)
    path = target_path(args.target, args.scope, args.env_file)
    with locked(state.backup_folder(path).name):
        plan = plan_restore(args.target, args.scope, args.env_file, to=args.to)
        if plan.diff:
            sys.stdout.write(printable(plan.diff))
        for note in plan.notes:
            print(printable(f"note: {note}"))
        if not plan.changed:
            print(printable(f"{plan.path} already is as it was {plan.label}: nothing to restore"))
            return 0
        if args.dry_run:
            print(printable(f"dry run: {plan.path} not written (would restore {plan.label})"))
            return 0
        if not args.yes:
            if not sys.stdin.isatty():
                err(f"driftdesk: error: restore {plan.label} of {plan.path}: add --yes to go on")
                return 1
            answer = input(f"Restore {plan.path} to {plan.label}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("not restored")
                return 1
        apply_restore(plan, force=args.force)
    print(
        printable(
            f"restored {plan.path} to {plan.label} (undo: driftdesk restore {args.target}"
            f"{_file_flags(args)})"
        )
    )
    return 0


def _file_flags(args: argparse.Namespace) -> str:
    if args.target == "env":
        return f" --env-file {args.env_file}" if args.env_file else ""
    return "" if args.scope == "user" else f" --scope {args.scope}"


def cmd_status(args: argparse.Namespace) -> int:
    from driftdesk.providers.status import collect_status

    rows = collect_status()
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2, ensure_ascii=False))
        return 0
    stale = _stale_paths(rows)
    for row in rows:
        active = row.profile or "-"
        drift = "  DRIFTED since driftdesk wrote it" if row.drifted else ""
        if row.drifted and row.drifted_keys:
            drift += f": {row.drifted_keys}"
        if row.path in stale:
            drift += f"  STALE: {stale[row.path]}"
        print(printable(f"{row.target:<6} {row.scope:<7} {active:<20} {row.path}{drift}"))
        if row.detail:
            print(f"{'':<15}{row.detail}")
    return 0


def _stale_paths(rows: list[Any]) -> dict[Any, str]:
    """Files holding an older version of their profile (edited since the switch), as
    ``profile edit`` calls them, each with the switch that brings it up to date."""
    from driftdesk.providers.profiles import ProfileError, ProfileStore
    from driftdesk.providers.status import stale_switches

    stale: dict[Any, str] = {}
    names = {name for row in rows for name in (row.profile, row.written_profile) if name}
    for name in sorted(names):
        try:
            profile = ProfileStore().get(name)
        except ProfileError:
            continue
        for plan in stale_switches(profile):
            where = f" --env-file {plan.path}" if plan.target == "env" else f" --scope {plan.scope}"
            stale[plan.path] = (
                f"{name} was edited since; re-apply with driftdesk switch {name} "
                f"--target {plan.target}{where}"
            )
    return stale


# --- exec -----------------------------------------------------------------------------------


def cmd_exec(args: argparse.Namespace) -> int:
    from driftdesk.providers.execenv import run_with_profile
    from driftdesk.providers.profiles import ProfileStore

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        err("usage: driftdesk exec NAME -- CMD [ARGS...]")
        return 2
    profile = ProfileStore().get(args.name)
    return run_with_profile(profile, cmd)
