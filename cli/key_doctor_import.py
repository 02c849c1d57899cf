"""CLI sub-commands around a profile's key and health: ``key`` (the key helper Claude Code and
Codex run on every key refresh: kept minimal, it imports its core lazily), ``doctor`` (checks
profiles, keys, configs and the live endpoint) and ``import claude|codex|env`` (a profile made
from a tool's config). Errors: ``cli.errors.guarded`` with ``PROVIDER_ERRORS``; ``key`` says
its own (nothing on stdout when it fails).
"""

from __future__ import annotations

import argparse
import json
import sys

from driftdesk.cli.errors import EXIT_BAD_INPUT, PROVIDER_ERRORS, err, guarded
from driftdesk.terminal import printable


def register_key(sub: argparse._SubParsersAction) -> None:
    """Add ``key`` to the top-level parser."""
    p = sub.add_parser(
        "key",
        help="print a profile's key on stdout (the helper tools call)",
        description="Print a profile's key on stdout: the command Claude Code's apiKeyHelper "
        "and Codex's auth.command run. Refused (exit 1, nothing on stdout) when "
        "DRIFTDESK_RUN_CHILD is set, i.e. inside a harness a driftdesk run started: a harness "
        "gets a throwaway key and the metering proxy's URL, never the real key.",
    )
    p.add_argument("name")
    p.set_defaults(func=cmd_key)


def register_doctor(sub: argparse._SubParsersAction) -> None:
    """Add ``doctor`` to the top-level parser."""
    p = sub.add_parser("doctor", help="check profiles, keys, configs and the live endpoint")
    p.add_argument("name", nargs="?")
    p.add_argument("--no-probe", action="store_true", help="skip the live request")
    p.add_argument("--timeout", type=float, default=10.0, help="probe timeout in seconds")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=guarded(cmd_doctor, PROVIDER_ERRORS))


def cmd_key(args: argparse.Namespace) -> int:
    # Kept minimal on purpose: Claude Code / Codex run this on every key refresh.
    from driftdesk.providers.keys import KeyMissing, KeyringUnavailable, KeyWithheld, get_key

    try:
        key = get_key(args.name)
    except KeyWithheld as exc:
        err(f"driftdesk: error: {exc}")
        return 1
    except (KeyMissing, KeyringUnavailable) as exc:
        # Only now read the profile (the hot path never parses the config file): a keyless
        # profile answers with the placeholder its clients insist on (`exec` gives the same),
        # an unknown name is named as such rather than as a keyring problem.
        from driftdesk.providers.errors import ProfileNotFound
        from driftdesk.providers.execenv import NO_KEY_PLACEHOLDER
        from driftdesk.providers.profiles import ProfileStore

        try:
            keyless = ProfileStore().get(args.name).no_key
        except ProfileNotFound as missing:
            err(f"driftdesk: error: {missing}")
            return EXIT_BAD_INPUT
        if not keyless:
            err(f"driftdesk: error: {exc}")
            return 1
        key = NO_KEY_PLACEHOLDER
    sys.stdout.write(key + "\n")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from driftdesk.providers.doctor import run_doctor

    checks = run_doctor(args.name, probe=not args.no_probe, timeout=args.timeout)
    if args.json:
        print(json.dumps([c.to_dict() for c in checks], indent=2, ensure_ascii=False))
    else:
        marks = {"ok": "ok  ", "warn": "WARN", "error": "FAIL"}
        for check in checks:
            print(f"[{marks[check.level]}] {check.name}: {check.message}")
            if check.fix and check.level != "ok":
                print(f"       fix: {check.fix}")
    return 1 if any(c.level == "error" for c in checks) else 0


# --- import ---------------------------------------------------------------------------------


def cmd_import_profile(args: argparse.Namespace) -> int:
    """``driftdesk import claude|codex|env [PATH] --name NAME [--scope] [--move-key] [--yes]``."""
    return guarded(_import_profile, PROVIDER_ERRORS)(args)


def _import_profile(args: argparse.Namespace) -> int:
    from driftdesk.providers.importer import import_profile, inspect_source
    from driftdesk.providers.profiles import ProfileError

    if not args.name:
        raise ProfileError("import needs --name NAME for the new profile")
    found = inspect_source(args.source, args.path, scope=args.scope)
    move_key = bool(args.move_key)
    if found.key and not move_key:
        if args.yes:
            move_key = True
        elif sys.stdin.isatty():
            answer = input(
                f"{found.path} holds a key ({found.key_where}). Move it out of the file "
                "(backed up first) now that it is in the keyring? [y/N] "
            )
            move_key = answer.strip().lower() in ("y", "yes")
    result = import_profile(args.source, args.path, args.name, move_key=move_key, scope=args.scope)
    profile = result.profile
    print(
        printable(
            f"imported {found.path} as profile {profile.name} ({profile.protocol}, {profile.model})"
        )
    )
    if result.key_stored:
        print(f"key stored in the OS keyring: {result.key_masked}")
    for note in result.notes:
        print(printable(f"note: {note}"))
    if result.diff:
        sys.stdout.write(printable(result.diff))
    return 0
