"""CLI sub-commands for provider profiles: ``profile add|list|show|edit|rm``, and the
registration of the whole profiles area (these, then ``key``, the switching commands of
``cli.switching`` and ``doctor``, in the order ``driftdesk --help`` lists them).

Handlers import their core lazily so ``driftdesk key NAME`` — run by Claude Code and Codex on
every key refresh — starts fast. Logic lives in ``providers``; these stay thin. Errors:
``cli.errors.guarded`` with ``PROVIDER_ERRORS``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from driftdesk.cli.errors import PROVIDER_ERRORS, err, guarded
from driftdesk.terminal import printable

if TYPE_CHECKING:
    from driftdesk.providers.profiles import Profile


def register(sub: argparse._SubParsersAction) -> None:
    """Add the profiles area's sub-commands to the top-level parser."""
    from driftdesk.cli import key_doctor_import, switching

    _register_profile(sub)
    key_doctor_import.register_key(sub)
    switching.register(sub)
    key_doctor_import.register_doctor(sub)


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
            "--link-faults",
            choices=["absorb", "retry", "none"],
            help="what its runs do with a 429/5xx/connection error before the answer's first "
            "byte: absorb (held at the proxy and sent again; the agent never sees it) or retry "
            "(the agent sees it; the whole try is rerun); run --link-faults overrides it; "
            "none clears it (the agent kind's default)",
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
    p.set_defaults(func=guarded(cmd_profile_add, PROVIDER_ERRORS))

    p = psub.add_parser("list", help="list profiles")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=guarded(cmd_profile_list, PROVIDER_ERRORS))

    p = psub.add_parser("show", help="show one profile (key masked)")
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=guarded(cmd_profile_show, PROVIDER_ERRORS))

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
    p.set_defaults(func=guarded(cmd_profile_edit, PROVIDER_ERRORS))

    p = psub.add_parser("rm", help="remove a profile and its keyring entry")
    p.add_argument("name")
    p.add_argument(
        "--yes",
        action="store_true",
        help="remove it even though files still point at it (they are named first)",
    )
    p.set_defaults(func=guarded(cmd_profile_rm, PROVIDER_ERRORS))


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
        link_faults=None if args.link_faults in (None, "none") else args.link_faults,
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
    err(f"driftdesk: warning: base URL {url}: {why}; clients would get 404s")
    if sys.stdin.isatty() and sys.stderr.isatty():
        answer = input(f"use {clean} instead? [Y/n] ").strip().lower()
        if answer in ("", "y", "yes"):
            return clean
    else:
        err(
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
    if args.link_faults is not None:
        profile.link_faults = None if args.link_faults == "none" else args.link_faults
        changed.append("link_faults")
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
    from driftdesk.reruns.injection import InjectSpecError, parse_inject

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
            err(f"driftdesk: error: {question}; remove anyway with --yes")
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
