"""CLI sub-commands for the profiles area: profile, key, switch, status, exec, doctor, import.

Handlers import their core lazily so ``driftdesk key NAME`` — run by Claude Code and Codex on
every key refresh — starts fast. Logic lives in ``providers``; these stay thin.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from driftdesk.terminal import printable

if TYPE_CHECKING:
    from driftdesk.providers.profiles import Profile

Handler = Callable[[argparse.Namespace], int]
# Exit codes (driftdesk --help): 2 for usage and bad input (argparse's own, an unknown or
# invalid profile), 1 for a command that was understood but failed.
EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's sub-commands to the top-level parser."""
    _register_profile(sub)

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
    p.set_defaults(func=_guarded(cmd_switch))

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
    p.set_defaults(func=_guarded(cmd_history))

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
    p.set_defaults(func=_guarded(cmd_restore))

    p = sub.add_parser("status", help="which profile each target points at, and drift")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_guarded(cmd_status))

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
    p.set_defaults(func=_guarded(cmd_exec))

    p = sub.add_parser("doctor", help="check profiles, keys, configs and the live endpoint")
    p.add_argument("name", nargs="?")
    p.add_argument("--no-probe", action="store_true", help="skip the live request")
    p.add_argument("--timeout", type=float, default=10.0, help="probe timeout in seconds")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_guarded(cmd_doctor))


def _register_profile(sub: argparse._SubParsersAction) -> None:
    profile = sub.add_parser("profile", help="add, list, show, edit or remove provider profiles")
    psub = profile.add_subparsers(dest="profile_command", metavar="ACTION", required=True)

    def fields(p: argparse.ArgumentParser, required: bool) -> None:
        p.add_argument("--protocol", choices=["openai", "anthropic"], required=required)
        p.add_argument("--base-url", required=required)
        p.add_argument("--model", required=required)
        p.add_argument("--haiku-model", help="anthropic: default haiku-class model")
        p.add_argument("--sonnet-model", help="anthropic: default sonnet-class model")
        p.add_argument("--opus-model", help="anthropic: default opus-class model")
        p.add_argument(
            "--header",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="extra HTTP header sent to the provider (repeatable; stored in plain text, so "
            "never a credential: Authorization, x-api-key and names with token, secret, key or "
            "cookie are refused; the key goes to the OS keyring)",
        )
        p.add_argument("--notes")
        p.add_argument(
            "--inject",
            metavar="SPEC",
            help="faults its runs inject at the proxy, as run --inject takes them (e.g. "
            "429=5%%,500=2%%; run --inject overrides it); edit --inject none clears it",
        )
        p.add_argument(
            "--auth-header",
            choices=["x-api-key", "bearer"],
            help="how the key is sent: x-api-key (Anthropic's API; the anthropic default) or "
            "bearer (Authorization: Bearer, what many gateways and every openai endpoint take); "
            "stored on the profile, used by run, exec and doctor alike",
        )
        p.add_argument(
            "--no-key",
            action="store_true",
            help="a keyless endpoint (a local vLLM or Ollama): no key is stored, asked for or sent",
        )
        p.add_argument("--key-stdin", action="store_true", help="read the key from stdin")

    p = psub.add_parser("add", help="create a profile (key from stdin or a hidden prompt)")
    p.add_argument("name")
    fields(p, required=True)
    p.set_defaults(func=_guarded(cmd_profile_add))

    p = psub.add_parser("list", help="list profiles")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_guarded(cmd_profile_list))

    p = psub.add_parser("show", help="show one profile (key masked)")
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_guarded(cmd_profile_show))

    p = psub.add_parser("edit", help="change fields of a profile, or its key")
    p.add_argument("name")
    fields(p, required=False)
    p.add_argument("--clear-headers", action="store_true")
    p.add_argument("--prompt-key", action="store_true", help="ask for a new key (hidden)")
    p.add_argument(
        "--reapply",
        action="store_true",
        help="re-apply the edited profile to every file it is switched into (without asking)",
    )
    p.set_defaults(func=_guarded(cmd_profile_edit))

    p = psub.add_parser("rm", help="remove a profile and its keyring entry")
    p.add_argument("name")
    p.add_argument(
        "--yes",
        action="store_true",
        help="remove it even though files still point at it (they are named first)",
    )
    p.set_defaults(func=_guarded(cmd_profile_rm))


def _guarded(handler: Handler) -> Handler:
    """Turn the cores' expected errors into one clear line on stderr and a non-zero exit."""

    def run(args: argparse.Namespace) -> int:
        from driftdesk.providers.errors import EXPECTED, ProfileError

        try:
            return handler(args)
        except BrokenPipeError:
            raise  # the reader left (`| head`): main ends quietly
        except EXPECTED as exc:
            print(printable(f"driftdesk: error: {exc}"), file=sys.stderr)
            # A profile named or given wrongly is bad input, as in `run`; the rest failed.
            return EXIT_BAD_INPUT if isinstance(exc, ProfileError) else 1

    run.__name__ = handler.__name__
    return run


def _err(message: str) -> None:
    print(printable(message), file=sys.stderr)  # it may name a path, or quote a file


# --- key ------------------------------------------------------------------------------------


def cmd_key(args: argparse.Namespace) -> int:
    # Kept minimal on purpose: Claude Code / Codex run this on every key refresh.
    from driftdesk.providers.keys import KeyMissing, KeyringUnavailable, KeyWithheld, get_key

    try:
        key = get_key(args.name)
    except KeyWithheld as exc:
        _err(f"driftdesk: error: {exc}")
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
            _err(f"driftdesk: error: {missing}")
            return EXIT_BAD_INPUT
        if not keyless:
            _err(f"driftdesk: error: {exc}")
            return 1
        key = NO_KEY_PLACEHOLDER
    sys.stdout.write(key + "\n")
    return 0


# --- profile --------------------------------------------------------------------------------


def _headers(profile_name: str, pairs: list[str]) -> dict[str, str]:
    from driftdesk.providers.profiles import (
        ProfileError,
        credential_header_problem,
        is_credential_header,
    )

    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            # Never echo what was given: it may be a key typed in the wrong place.
            raise ProfileError(
                f"--header expects NAME=VALUE, got {len(pair)} characters without '=' "
                "(not shown: it may be a key; keys go to the keyring with --key-stdin)"
            )
        if is_credential_header(name):
            raise ProfileError("--header: " + credential_header_problem(profile_name, name.strip()))
        out[name.strip()] = value.strip()
    return out


def _read_key(args: argparse.Namespace, name: str, prompt: bool) -> str | None:
    """The key from stdin (``--key-stdin``) or a hidden prompt on a TTY; None if neither."""
    if args.key_stdin:
        key = sys.stdin.read().strip()
        if not key:
            from driftdesk.providers.profiles import ProfileError

            raise ProfileError("--key-stdin given but stdin was empty")
        return key
    if prompt and sys.stdin.isatty():
        import getpass

        key = getpass.getpass(f"API key for {name} (hidden; empty to skip): ").strip()
        return key or None
    return None


def cmd_profile_add(args: argparse.Namespace) -> int:
    from driftdesk.providers.keys import backend, set_key
    from driftdesk.providers.profiles import (
        Profile,
        ProfileError,
        ProfileStore,
        default_auth_header,
    )

    store = ProfileStore()
    if store.exists(args.name):
        raise ProfileError(
            f"profile {args.name!r} exists; change it with: driftdesk profile edit {args.name}"
        )
    profile = Profile(
        name=args.name,
        protocol=args.protocol,
        base_url=args.base_url,
        model=args.model,
        haiku_model=args.haiku_model,
        sonnet_model=args.sonnet_model,
        opus_model=args.opus_model,
        headers=_headers(args.name, args.header),
        notes=args.notes or "",
        # Stored explicitly, so a later change of default never changes a profile's header.
        auth_header=args.auth_header or default_auth_header(args.protocol),
        no_key=args.no_key,
        inject=_inject_setting(args.inject),
    )
    profile.validate()
    if args.no_key and args.key_stdin:
        raise ProfileError("--no-key and --key-stdin contradict each other: pick one")
    profile.base_url = _offer_clean_url(profile.name, profile.base_url)
    key = None if args.no_key else _read_key(args, args.name, prompt=True)
    if key is not None:
        backend()  # fail before saving anything if there is no usable keyring
        set_key(profile.name, key)
    store.save(profile)
    print(f"added profile {profile.name} ({profile.protocol}, {profile.model})")
    if profile.no_key:
        print("keyless profile: no key is stored or sent")
    elif key is None:
        why = (
            "none entered"
            if sys.stdin.isatty()
            else "stdin is not a terminal and --key-stdin was not given"
        )
        print(
            f"no key stored ({why}); "
            f"add one with: driftdesk profile edit {profile.name} --key-stdin"
        )
    else:
        print(f"key stored in the OS keyring: {_masked(key)}")
    return 0


def _offer_clean_url(name: str, url: str) -> str:
    """Warn about a base URL clients would append their paths to wrongly; on a terminal offer
    the cleaned one (default yes), otherwise keep the URL as given and say how to change it."""
    from driftdesk.providers.urls import cleaned_base_url

    found = cleaned_base_url(url)
    if found is None:
        return url
    clean, why = found
    _err(f"driftdesk: warning: base URL {url}: {why}; clients would get 404s")
    if sys.stdin.isatty() and sys.stderr.isatty():
        answer = input(f"use {clean} instead? [Y/n] ").strip().lower()
        if answer in ("", "y", "yes"):
            return clean
    else:
        _err(
            f"  kept as given; to use the cleaned URL: driftdesk profile edit {name} --base-url {clean}"
        )
    return url


def _masked(key: str | None) -> str:
    from driftdesk.secrets import mask_key

    return mask_key(key)


def _profile_view(profile: Profile) -> dict[str, Any]:
    from driftdesk.providers.keys import KeyMissing, KeyringUnavailable, get_key
    from driftdesk.providers.profiles import is_credential_header

    view = profile.to_dict()
    # A hand-edited config may still hold one: shown masked, never raw.
    view["headers"] = {
        name: _masked(value) if is_credential_header(name) else value
        for name, value in profile.headers.items()
    }
    try:
        key: str | None = get_key(profile.name)
        view["key"] = _masked(key)
        view["key_present"] = True
    except KeyMissing:
        view["key"] = None
        view["key_present"] = False
    except KeyringUnavailable as exc:
        view["key"] = None
        view["key_present"] = None
        view["keyring_error"] = str(exc)
    return view


def cmd_profile_list(args: argparse.Namespace) -> int:
    from driftdesk.providers.profiles import ProfileStore

    views = [_profile_view(p) for p in ProfileStore().all()]
    if args.json:
        print(json.dumps(views, indent=2, ensure_ascii=False))
        return 0
    if not views:
        print(
            "no profiles yet: driftdesk profile add NAME --protocol ... --base-url ... --model ..."
        )
        return 0
    rows = [
        (
            v["name"],
            v["protocol"],
            v["model"],
            v["base_url"],
            "(keyless)"
            if v.get("no_key")
            else v["key"] or ("(keyring unavailable)" if v["key_present"] is None else "(no key)"),
        )
        for v in views
    ]
    header = ("NAME", "PROTOCOL", "MODEL", "BASE URL", "KEY")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_profile_show(args: argparse.Namespace) -> int:
    from driftdesk.providers.profiles import ProfileStore

    view = _profile_view(ProfileStore().get(args.name))
    if args.json:
        print(json.dumps(view, indent=2, ensure_ascii=False))
        return 0
    for field_name in ("name", "protocol", "base_url", "model", "haiku_model", "sonnet_model"):
        if view.get(field_name):
            print(f"{field_name:<13} {view[field_name]}")
    if view.get("opus_model"):
        print(f"{'opus_model':<13} {view['opus_model']}")
    for header, value in view["headers"].items():
        print(f"{'header':<13} {header}: {value}")  # view() masked credential headers
    if view["notes"]:
        print(f"{'notes':<13} {view['notes']}")
    print(f"{'auth header':<13} {profile_auth_label(view)}")
    if view.get("no_key"):
        print(f"{'key':<13} (keyless profile: none sent)")
    elif view["key_present"] is None:
        print(f"{'key':<13} (keyring unavailable: {view['keyring_error']})")
    else:
        print(f"{'key':<13} {view['key'] or '(none in the keyring)'}")
    return 0


def profile_auth_label(view: dict[str, Any]) -> str:
    from driftdesk.providers.profiles import default_auth_header

    header = view.get("auth_header") or default_auth_header(view["protocol"])
    return "x-api-key" if header == "x-api-key" else "Authorization: Bearer"


def cmd_profile_edit(args: argparse.Namespace) -> int:
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import ProfileStore

    store = ProfileStore()
    profile = store.get(args.name)
    changed = []
    for attr in (
        "protocol",
        "base_url",
        "model",
        "haiku_model",
        "sonnet_model",
        "opus_model",
        "notes",
        "auth_header",
    ):
        value = getattr(args, attr)
        if value is not None:
            # An empty string clears an optional field.
            setattr(profile, attr, value if value or attr in ("notes",) else None)
            changed.append(attr)
    if args.inject is not None:
        profile.inject = _inject_setting(args.inject)
        changed.append("inject")
    if args.clear_headers:
        profile.headers = {}
        changed.append("headers")
    if args.header:
        profile.headers.update(_headers(args.name, args.header))
        changed.append("headers")
    if args.no_key and not profile.no_key:
        profile.no_key = True
        changed.append("no_key")
        _drop_stale_key(profile.name)
    key = _read_key(args, args.name, prompt=args.prompt_key)
    if key is not None and profile.no_key:
        profile.no_key = False  # a key given: the profile is no longer keyless
        changed.append("no_key")
    if changed:
        store.save(profile)
    if key is not None:
        set_key(profile.name, key)
        changed.append("key")
    if not changed:
        print(f"nothing to change for {profile.name} (see driftdesk profile edit --help)")
        return 0
    print(f"updated {profile.name}: {', '.join(changed)}")
    _offer_reapply(profile, args.reapply)
    return 0


def _inject_setting(text: str | None) -> str | None:
    """A profile's ``inject`` as stored: checked now (a bad spec is refused before anything is
    saved); ``none`` or empty: no injection."""
    from driftdesk.providers.profiles import ProfileError
    from driftdesk.reruns.faults import InjectSpecError, parse_inject

    if text is None or text.strip().lower() in ("", "none"):
        return None
    try:
        parse_inject(text)
    except InjectSpecError as exc:
        raise ProfileError(f"--inject: {exc}") from None
    return text.strip()


def _drop_stale_key(name: str) -> None:
    """A profile made keyless keeps no key: `driftdesk key` would otherwise still hand it out."""
    from driftdesk.providers.keys import KeyringUnavailable, delete_key

    try:
        if delete_key(name):
            print(f"removed the stored key of {name} from the OS keyring")
    except KeyringUnavailable:
        pass  # no keyring: nothing can be stored there either


def _offer_reapply(profile: Profile, reapply: bool) -> None:
    """Files the profile is switched into keep its old settings until switched again: name
    them, and re-apply (asked on a terminal, or with --reapply)."""
    from driftdesk.providers.status import stale_switches
    from driftdesk.providers.targets import apply_switch

    for plan in stale_switches(profile):
        where = f"{plan.target} ({plan.scope}) {plan.path}"
        if not reapply and sys.stdin.isatty():
            sys.stdout.write(printable(plan.diff))
            answer = input(
                f"{where} still has the old settings of {profile.name}; re-apply? [y/N] "
            )
            reapply_this = answer.strip().lower() in ("y", "yes")
        else:
            reapply_this = reapply
        if reapply_this:
            apply_switch(plan)
            print(printable(f"re-applied {profile.name} to {where}"))
        else:
            args = f" --env-file {plan.path}" if plan.target == "env" else f" --scope {plan.scope}"
            print(
                printable(
                    f"note: {where} is stale (old settings of {profile.name}): re-apply with "
                    f"driftdesk switch {profile.name} --target {plan.target}{args}"
                )
            )


def cmd_profile_rm(args: argparse.Namespace) -> int:
    from driftdesk.providers.profiles import ProfileStore
    from driftdesk.providers.removal import remove_profile
    from driftdesk.providers.status import collect_status

    ProfileStore().get(args.name)  # a clear "no profile named" before asking anything
    in_use = [row for row in collect_status() if row.profile == args.name]
    if in_use and not args.yes:
        for row in in_use:
            print(printable(f"{row.target} ({row.scope}) {row.path} points at {args.name}"))
        question = (
            f"those files would be left asking `driftdesk key {args.name}` for a key that is "
            "gone (switch them to another profile, or restore them, first)"
        )
        if not sys.stdin.isatty():
            _err(f"driftdesk: error: {question}; remove anyway with --yes")
            return 1
        if input(f"{question}. Remove {args.name} anyway? [y/N] ").strip().lower() not in (
            "y",
            "yes",
        ):
            print(f"kept profile {args.name}")
            return 1
    removed = remove_profile(args.name)
    print(f"removed profile {args.name}" + (" and its keyring entry" if removed.had_key else ""))
    for row in removed.still_pointing:
        print(
            f"note: {row.target} ({row.scope}) still points at {args.name} in {row.path}; "
            "switch it to another profile"
        )
    return 0


# --- switch / status ------------------------------------------------------------------------


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
            _err(f"driftdesk: warning: {unsaved_keys_message(plan)}")
        if plan.stale_keys:
            _err(f"driftdesk: warning: {stale_keys_message(plan)}")
        if args.dry_run:
            print(printable(f"dry run: {plan.path} not written"))
            return 0
        damaged_before = state.damaged_indexes(plan.path)
        apply_switch(plan, force=args.force)
        if state.damaged_indexes(plan.path) != damaged_before:
            from driftdesk.providers.restore import file_history

            _err(f"driftdesk: warning: {file_history(plan.path).damage_warning()}")
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
            _err(f"driftdesk: warning: {warning}")
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
                _err(f"driftdesk: error: restore {plan.label} of {plan.path}: add --yes to go on")
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
        _err("usage: driftdesk exec NAME -- CMD [ARGS...]")
        return 2
    profile = ProfileStore().get(args.name)
    return run_with_profile(profile, cmd)


# --- doctor ---------------------------------------------------------------------------------


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
    return _guarded(_import_profile)(args)


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
