"""Switch a profile into Claude Code, Codex or a ``.env`` file — edited in place, never rewritten.

Two steps so every face can show the diff before anything is written::

    plan = plan_switch(profile, "claude", scope="user")   # reads the file, computes the new text
    print(plan.diff)                                       # unified diff (secrets masked)
    apply_switch(plan)                                     # backs up, writes atomically, records

``apply_switch`` refuses (``TargetChanged``) if the file changed since ``plan_switch`` read it
(checked under a lock, and again just before the rename).
A file that does not parse is refused (``TargetParseError``) and left untouched. No key is ever
written: Claude Code's ``apiKeyHelper`` and Codex's ``auth.command`` run ``driftdesk key NAME``.

What driftdesk owns, per target (everything else stays byte-for-byte):

- claude: ``apiKeyHelper``; in ``env``: ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_MODEL``,
  ``ANTHROPIC_DEFAULT_{HAIKU,SONNET,OPUS}_MODEL``, ``ANTHROPIC_CUSTOM_HEADERS``; it removes
  ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_AUTH_TOKEN`` (they would beat the helper). A removed
  key that no profile holds in the keyring is listed in ``unsaved_keys`` so a face warns: it
  stays recoverable, because the backup taken first keeps it (in the OS keyring) and
  ``driftdesk restore`` gives the file back byte for byte. Where no backup can be taken (no
  keyring) the switch is refused. We do not import the key on our own: it may belong to
  another provider than the profile switched in (``driftdesk import claude --move-key``).
- codex: top-level ``model`` and ``model_provider``; ``[model_providers.driftdesk-NAME]``.
- env: ``OPENAI_BASE_URL`` and ``OPENAI_MODEL`` lines.

It stays whole (past 600 lines): planning, applying and the three in-place editors share one
contract, what driftdesk owns per target (listed above), and the masked diff; the editors are
the only writers of that contract (``plan_switch`` and ``providers.importer`` call them).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from driftdesk.providers import jsonsplice, locations, state
from driftdesk.providers.dotenv import (
    ENV_LINE,
    assigned_values,
    env_quote,
    env_unquote,
    parse_env_lines,
    split_env_comment,
)
from driftdesk.providers.errors import SwitchError, TargetChanged, TargetParseError, UnsavedKeys  # noqa: F401
from driftdesk.providers.profiles import Profile
from driftdesk.secrets import mask_key, redact

Target = Literal["claude", "codex", "env"]
TARGETS: tuple[str, ...] = ("claude", "codex", "env")

CLAUDE_OWNED_ENV = (
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_CUSTOM_HEADERS",
)
CLAUDE_KEY_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
CODEX_PROVIDER_PREFIX = "driftdesk-"
ENV_OWNED = ("OPENAI_BASE_URL", "OPENAI_MODEL")
# Codex (since 0.130, openai/codex PR #20098 / issue #22222) drops these keys from a project's
# .codex/config.toml with a startup warning: a provider switched in there is silently ignored.
CODEX_PROJECT_IGNORED = (
    "model_provider",
    "model_providers",
    "openai_base_url",
    "chatgpt_base_url",
    "profile",
    "profiles",
)
CODEX_PROJECT_REFUSAL = (
    "Codex ignores model_provider and [model_providers.*] in a project's .codex/config.toml "
    "(since Codex 0.130, for safety: openai/codex#22222; verified with Codex 0.171), so a "
    "project-scope switch would not take effect. Pin the profile per launch instead: "
    "driftdesk exec {name} -- codex [ARGS] (your files stay untouched), or switch the user "
    "config: driftdesk switch {name} --target codex"
)


@dataclass
class SwitchPlan:
    target: str
    path: Path
    old_text: str | None  # None: the file does not exist yet
    new_text: str
    diff: str
    changed: bool
    profile: str
    scope: str = "user"
    notes: list[str] = field(default_factory=list)
    # Keys the edit removes that no profile holds in the keyring: "env.ANTHROPIC_API_KEY
    # (sk-…7f3a)" (masked); a face warns (they stay recoverable with restore).
    unsaved_keys: list[str] = field(default_factory=list)
    # env: key lines the switch leaves in place, which tools loading the file would now send to
    # the new endpoint: "OPENAI_API_KEY (sk-…7f3a)" (masked).
    stale_keys: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # old_text may hold a user's key
        return f"SwitchPlan({self.target!r}, {str(self.path)!r}, changed={self.changed})"


def codex_provider_id(profile_name: str) -> str:
    return CODEX_PROVIDER_PREFIX + profile_name


def target_path(
    target: str,
    scope: str = "user",
    env_file: Path | str | None = None,
    project_dir: Path | None = None,
) -> Path:
    if target == "claude":
        return locations.claude_settings_path(scope, project_dir)
    if target == "codex":
        return locations.codex_config_path(scope, project_dir)
    if target == "env":
        return locations.env_file_path(env_file, project_dir)
    raise SwitchError(f"unknown target {target!r}: expected one of {', '.join(TARGETS)}")


def read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TargetParseError(
            f"{path} is not UTF-8 text ({exc}); driftdesk left it untouched"
        ) from exc


def plan_switch(
    profile: Profile,
    target: str,
    scope: str = "user",
    env_file: Path | str | None = None,
    project_dir: Path | None = None,
) -> SwitchPlan:
    """Read the target file and compute the edit that points it at ``profile``. Writes nothing."""
    if target == "codex" and scope == "project":
        raise SwitchError(CODEX_PROJECT_REFUSAL.format(name=profile.name))
    path = target_path(target, scope, env_file, project_dir)
    old = read_text(path)
    notes: list[str] = []
    secrets: list[str] = []
    if target == "claude":
        new = edit_claude_settings(old, profile, path, secrets)
    elif target == "codex":
        new = edit_codex_config(old, profile, path)
    else:
        new = edit_env_file(old, profile, path)
        stale = [f"{name} ({mask_key(value)})" for name, value in env_key_lines(old or "")]
        if not profile.no_key:  # a keyless profile has no key to hand over
            notes.append(
                "the .env file gets no key: run tools with `driftdesk exec "
                f"{profile.name} -- CMD` to hand them the key"
            )
    verify_foreign_keys(target, old, new, profile, path)
    diff = unified_diff(path, old, new)
    secrets.extend(secret_values(target, old or "", path))
    return SwitchPlan(
        target=target,
        path=path,
        old_text=old,
        new_text=new,
        diff=redact(diff, secrets),
        changed=new != old,
        profile=profile.name,
        scope=scope,
        notes=notes,
        unsaved_keys=unsaved_keys(removed_keys(target, old, new)),
        stale_keys=stale if target == "env" else [],
    )


def owns(target: str, key: str, profile: Profile) -> bool:
    """Is the dotted ``key`` one a switch of ``profile`` into ``target`` may change?"""
    if target == "claude":
        owned_env = {f"env.{k}" for k in (*CLAUDE_OWNED_ENV, *CLAUDE_KEY_ENV)}
        return key in owned_env or key in ("env", "apiKeyHelper")
    if target == "codex":
        ours = f"model_providers.{codex_provider_id(profile.name)}"
        return key in ("model", "model_provider", "model_providers", ours) or key.startswith(
            ours + "."
        )
    return key in ENV_OWNED


def verify_foreign_keys(
    target: str, old: str | None, new: str, profile: Profile, path: Path
) -> None:
    """Parse the edit back and refuse it unless every key driftdesk does not own keeps its
    value (and every owned key came out as intended)."""
    from driftdesk.providers.changes import flatten

    before, after = flatten(target, old), flatten(target, new)
    if after is None:
        raise SwitchError(f"the edit of {path} would not parse back; driftdesk left it untouched")
    if before is None:
        return  # unparsable input was refused earlier
    changed = sorted(
        key
        for key in set(before) | set(after)
        if not owns(target, key, profile) and before.get(key, _MISSING) != after.get(key, _MISSING)
    )
    if target == "codex":
        for key, wanted in (
            ("model", profile.model),
            ("model_provider", codex_provider_id(profile.name)),
        ):
            if after.get(key) != wanted:
                changed.append(key)
    if changed:
        raise SwitchError(
            f"the edit of {path} would change {', '.join(changed)}, which driftdesk does not "
            "own (a TOML layout it cannot edit safely, such as dotted keys before top-level "
            "keys?); driftdesk left the file untouched — move the top-level keys above the "
            "dotted ones, or use driftdesk exec NAME -- codex"
        )


_MISSING = object()


ENV_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def env_key_lines(text: str) -> list[tuple[str, str]]:
    """(variable, value) of the provider keys a .env file holds (references like $VAR aside)."""
    from driftdesk.providers.masking import is_plain_value

    try:
        lines = parse_env_lines(text, Path(".env"))
    except TargetParseError:
        return []
    return [
        (name, value)
        for name, value in assigned_values(lines)
        if name in ENV_KEY_VARIABLES and not is_plain_value(value)
    ]


def stale_keys_message(plan: SwitchPlan) -> str:
    return (
        f"{plan.path} still holds {', '.join(plan.stale_keys)}: any tool that loads this file "
        "now sends that key to the profile's endpoint. Move it into the OS keyring (the file "
        f"is backed up first): driftdesk switch {plan.profile} --target env --env-file "
        f"{plan.path} --move-key"
    )


def removed_keys(target: str, old: str | None, new: str) -> list[tuple[str, str]]:
    """(where, value) of keys in ``old`` that ``new`` no longer holds."""
    from driftdesk.providers.masking import secret_entries

    if not old:
        return []
    if target == "claude":
        # Only the variables the switch removes: other secret-named entries stay as they are.
        entries = [e for e in secret_entries(target, old) if e.where.startswith("env.ANTHROPIC_")]
    else:
        entries = secret_entries(target, old)
    return [(e.where, e.value) for e in entries if e.value not in new]


def unsaved_keys(removed: list[tuple[str, str]], saved: tuple[str, ...] = ()) -> list[str]:
    """The removed keys that no profile holds in the keyring, as "where (masked)"."""
    candidates = [(where, value) for where, value in removed if value not in saved]
    if not candidates:
        return []
    held = keys_in_keyring({value for _, value in candidates})
    return [f"{where} ({mask_key(value)})" for where, value in candidates if value not in held]


def keys_in_keyring(values: set[str]) -> set[str]:
    """Which of ``values`` some profile's keyring entry holds (none if the keyring is unusable)."""
    from driftdesk.providers.keys import KeyMissing, KeyringUnavailable, get_key
    from driftdesk.providers.profiles import ProfileError, ProfileStore

    held: set[str] = set()
    try:
        names = ProfileStore().names()
    except ProfileError:
        return held
    for name in names:
        try:
            key = get_key(name)
        except KeyMissing:
            continue
        except KeyringUnavailable:
            break
        if key in values:
            held.add(key)
    return held


def unsaved_keys_message(plan: SwitchPlan) -> str:
    """The warning a face shows when a switch removes ``plan.unsaved_keys``."""
    return (
        f"{plan.path} holds {', '.join(plan.unsaved_keys)}: no driftdesk profile has this key "
        "in the OS keyring and the switch removes it from the file. It stays recoverable: the "
        "backup taken first keeps it in the OS keyring, and `driftdesk restore "
        f"{plan.target}{restore_args(plan)}` puts the file back as it was. To use it as a "
        f"profile: driftdesk import {plan.target} {plan.path} --name NAME --move-key"
    )


def restore_args(plan: SwitchPlan) -> str:
    """The ``--scope`` / ``--env-file`` arguments that name ``plan``'s file to ``restore``."""
    if plan.target == "env":
        return f" --env-file {plan.path}"
    return "" if plan.scope == "user" else f" --scope {plan.scope}"


def secret_values(target: str, text: str, path: Path) -> list[str]:
    """Values in the file stored under secret-looking names: the diff's context lines may show
    them, and our output never shows a key (masked instead)."""
    from driftdesk.providers.masking import secret_entries

    return [entry.value for entry in secret_entries(target, text)]


def apply_switch(plan: SwitchPlan, discard_unsaved_keys: bool = False, force: bool = False) -> None:
    """Write ``plan``: under the file's lock, refuse if the file changed since planned; back up
    (exact, secrets in the keyring), write atomically, record the write in the file's history.

    Keys the edit removes (``plan.unsaved_keys``) stay recoverable from the backup with
    ``driftdesk restore``; ``discard_unsaved_keys`` is kept for callers of the older API."""
    apply_edit(
        plan.path, plan.target, plan.old_text, plan.new_text, plan.profile, "switch", force=force
    )


def apply_edit(
    path: Path,
    kind: str,
    old_text: str | None,
    new_text: str | None,
    profile: str | None,
    action: str,
    summary_prefix: str = "",
    force: bool = False,
) -> None:
    """Replace ``path``'s ``old_text`` with ``new_text`` (None: remove the file), backed up first
    and recorded; ``TargetChanged`` if the file no longer holds ``old_text``. A read-only file
    is refused unless ``force`` (someone made it so on purpose)."""
    from driftdesk.filelock import locked
    from driftdesk.providers import changes, userfile

    old = None if old_text is None else old_text.encode("utf-8", "surrogateescape")
    data = None if new_text is None else new_text.encode("utf-8", "surrogateescape")
    with locked(state.backup_folder(path).name):
        current = userfile.current_bytes(path)
        if current != old:
            raise TargetChanged(
                f"{path} changed since driftdesk read it; nothing was written — plan the switch again"
            )
        userfile.check_writable(path, force, action)
        if data == current:
            if data is not None:
                state.record_write(path, kind, profile, data)
                state.keep_written(path, data, kind)
            return
        before = state.back_up(path, current, kind=kind)
        userfile.replace_checked(path, data, current)
        if data is not None:
            state.keep_written(path, data, kind)
        state.record_write(
            path,
            kind,
            profile,
            data,
            before=before,
            before_sha256=None if current is None else state.sha256_bytes(current),
            action=action,
            summary=summary_prefix + changes.summarize(kind, old_text, new_text),
        )


def unified_diff(path: Path, old: str | None, new: str) -> str:
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=str(path) if old is not None else "/dev/null",
        tofile=str(path),
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


# --- Claude Code settings.json ------------------------------------------------------------


def claude_env_values(profile: Profile) -> dict[str, str | None]:
    """The ``env`` entries a profile sets (None: driftdesk removes that entry)."""
    headers = "\n".join(f"{k}: {v}" for k, v in profile.headers.items()) or None
    return {
        "ANTHROPIC_BASE_URL": profile.base_url,
        "ANTHROPIC_MODEL": profile.model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": profile.haiku_model or None,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": profile.sonnet_model or None,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": profile.opus_model or None,
        "ANTHROPIC_CUSTOM_HEADERS": headers,
    }


def edit_claude_settings(
    old: str | None, profile: Profile, path: Path, secrets: list[str] | None = None
) -> str:
    if profile.protocol != "anthropic":
        raise SwitchError(
            f"Claude Code speaks the Anthropic protocol; profile {profile.name!r} is "
            f"{profile.protocol!r} (use --target codex or env, or an anthropic profile)"
        )
    env_values = claude_env_values(profile)
    helper = locations.key_helper_shell(profile.name)
    if old is None:
        fresh: dict[str, Any] = {
            "env": {k: v for k, v in env_values.items() if v is not None},
            "apiKeyHelper": helper,
        }
        return json.dumps(fresh, indent=2, ensure_ascii=False) + "\n"
    bom = "\ufeff" if old.startswith("\ufeff") else ""
    text = old[len(bom) :]
    try:
        value, top = jsonsplice.parse_document(text)
    except jsonsplice.JsonEditError as exc:
        raise TargetParseError(
            f"{path} does not parse ({exc}); fix it by hand — driftdesk left it untouched"
        ) from exc
    env = value.get("env")
    if env is not None and not isinstance(env, dict):
        raise TargetParseError(
            f'{path}: "env" is a {type(env).__name__}, expected an object; driftdesk left it untouched'
        )
    if secrets is not None and isinstance(env, dict):
        secrets.extend(str(env[k]) for k in CLAUDE_KEY_ENV if isinstance(env.get(k), str))
    wanted = {k: v for k, v in env_values.items() if v is not None}
    if not value:
        # An empty object has no style to follow: write it out like a fresh file.
        body = json.dumps({"env": wanted, "apiKeyHelper": helper}, indent=2, ensure_ascii=False)
        return bom + text[: top.start] + body + text[top.end :]
    if env is None:
        text = jsonsplice.set_member(
            text, top, "env", jsonsplice.nested_value_text(text, top, wanted)
        )
    else:
        for key, env_value in env_values.items():
            env_span = _env_span(text)
            if env_value is None:
                text = jsonsplice.remove_member(text, env_span, key)
            elif env.get(key) != env_value:
                text = jsonsplice.set_member(text, env_span, key, jsonsplice.dump_value(env_value))
        for key in CLAUDE_KEY_ENV:
            text = jsonsplice.remove_member(text, _env_span(text), key)
    top = jsonsplice.scan_object(text, top.start)
    if value.get("apiKeyHelper") != helper:
        text = jsonsplice.set_member(text, top, "apiKeyHelper", jsonsplice.dump_value(helper))
    return bom + text


def _env_span(text: str) -> jsonsplice.ObjectSpan:
    _, top = jsonsplice.parse_document(text)
    member = top.find("env")
    assert member is not None
    return jsonsplice.scan_object(text, member.value_start)


# --- Codex config.toml ----------------------------------------------------------------------


def edit_codex_config(old: str | None, profile: Profile, path: Path) -> str:
    import tomlkit
    import tomlkit.exceptions
    from tomlkit.container import OutOfOrderTableProxy
    from tomlkit.items import Table

    if profile.protocol != "openai":
        raise SwitchError(
            f"Codex speaks the OpenAI Responses API; profile {profile.name!r} is "
            f"{profile.protocol!r} (use --target claude, or an openai profile)"
        )
    try:
        doc = tomlkit.parse(old or "")
    except tomlkit.exceptions.ParseError as exc:
        raise TargetParseError(
            f"{path} does not parse as TOML ({exc}); fix it by hand — driftdesk left it untouched"
        ) from exc
    provider_id = codex_provider_id(profile.name)
    providers = doc.get("model_providers")
    if providers is None:
        providers = tomlkit.table(is_super_table=True)
        doc["model_providers"] = providers
    elif not isinstance(providers, Table | OutOfOrderTableProxy):
        raise TargetParseError(
            f"{path}: model_providers is not a table (an inline table?); driftdesk edits only "
            "[model_providers.<id>] tables and left the file untouched"
        )
    argv = locations.key_helper_argv(profile.name)
    owned: dict[str, Any] = {
        "name": f"driftdesk: {profile.name}",
        "base_url": profile.base_url,
        "wire_api": "responses",  # never "chat": current Codex rejects it
    }
    existing = providers.get(provider_id)
    table = existing if isinstance(existing, Table) else tomlkit.table()
    for key, val in owned.items():
        if table.get(key) != val:
            table[key] = val
    for stale in ("env_key", "experimental_bearer_token"):
        if stale in table:
            del table[stale]
    if profile.headers:
        headers = tomlkit.inline_table()
        headers.update(profile.headers)
        if dict(table.get("http_headers", {})) != profile.headers:
            table["http_headers"] = headers
    elif "http_headers" in table:
        del table["http_headers"]
    auth = table.get("auth")
    if not isinstance(auth, Table):
        auth = tomlkit.table()
        auth["command"] = argv[0]
        auth["args"] = argv[1:]
        table["auth"] = auth
    else:
        if auth.get("command") != argv[0]:
            auth["command"] = argv[0]
        if list(auth.get("args", [])) != argv[1:]:
            auth["args"] = argv[1:]
    # model_providers defined only by dotted keys (`model_providers.azure.name = ...` among
    # the top-level keys): tomlkit would put a new sub-table where those keys are, and what
    # follows them (`model = ...`) would land inside it. Such a table gets our sub-table as a
    # [model_providers.<id>] header of its own at the end, which TOML allows.
    prelude = re.split(r"(?m)^[ \t]*\[", old or "", maxsplit=1)[0]  # the top-level keys
    dotted_only = not isinstance(existing, Table) and bool(
        re.search(r"(?m)^[ \t]*model_providers[ \t]*\.", prelude)
    )
    if not isinstance(existing, Table) and not dotted_only:
        providers[provider_id] = table
    if doc.get("model") != profile.model:
        doc["model"] = profile.model
    if doc.get("model_provider") != provider_id:
        doc["model_provider"] = provider_id
    text = tomlkit.dumps(doc)
    if dotted_only:
        ours = tomlkit.document()
        ours["model_providers"] = tomlkit.table(is_super_table=True)
        ours["model_providers"][provider_id] = table
        text = text.rstrip("\n") + "\n\n" + tomlkit.dumps(ours).lstrip("\n")
    new = _space_owned_tables(text, tomlkit.key(provider_id).as_string())
    if old is not None and "\r\n" in old and not re.search(r"(?<!\r)\n", old):
        # tomlkit writes "\n" for what it adds; keep a CRLF file CRLF.
        new = re.sub(r"(?<!\r)\n", "\r\n", new)
    if old is None and not new.endswith("\n"):
        new += "\n"
    return new


def _space_owned_tables(text: str, quoted_id: str) -> str:
    """A blank line before and after our ``[model_providers.<id>]`` block (tomlkit inserts new
    tables flush against their neighbours)."""
    lines = text.splitlines(keepends=True)
    ours = (f"[model_providers.{quoted_id}]", f"[model_providers.{quoted_id}.")

    def is_header(line: str) -> bool:
        return line.lstrip().startswith("[")

    index = 0
    while index < len(lines):
        if not lines[index].lstrip().startswith(ours):
            index += 1
            continue
        if index > 0 and lines[index - 1].strip():
            lines.insert(index, "\n")
            index += 1
        end = index + 1
        while end < len(lines) and not (
            is_header(lines[end]) and not lines[end].lstrip().startswith(ours)
        ):
            end += 1
        if end < len(lines) and lines[end - 1].strip():
            if not lines[end - 1].endswith("\n"):
                lines[end - 1] += "\n"
            lines.insert(end, "\n")
            end += 1
        index = end
    return "".join(lines)


# --- .env files -----------------------------------------------------------------------------


def edit_env_file(old: str | None, profile: Profile, path: Path) -> str:
    if profile.protocol != "openai":
        raise SwitchError(
            f"the env target sets OPENAI_* variables; profile {profile.name!r} is "
            f"{profile.protocol!r} (use `driftdesk exec {profile.name} -- CMD` for anthropic tools)"
        )
    values = {"OPENAI_BASE_URL": profile.base_url, "OPENAI_MODEL": profile.model}
    text = old or ""
    lines = parse_env_lines(text, path)
    newline = "\r\n" if "\r\n" in text else "\n"
    assignments = [line for line in lines if line.key]
    uses_export = bool(assignments) and sum(a.export for a in assignments) * 2 > len(assignments)
    done: set[str] = set()
    for line in lines:
        if line.key in values:
            match = ENV_LINE.match(line.text)
            assert match is not None
            current, comment = split_env_comment(match.group("value"))
            wanted = env_quote(values[line.key], style=current[:1]) + comment
            # Every occurrence: a shell or dotenv loader takes the last one, a reader the first.
            if env_unquote(current) != values[line.key]:
                eol = line.text[len(line.text.rstrip("\r\n")) :]
                line.text = (
                    match.group("indent")
                    + (match.group("export") or "")
                    + line.key
                    + match.group("eq")
                    + wanted
                    + eol
                )
            done.add(line.key)
    result = "".join(line.text for line in lines)
    missing = [k for k in values if k not in done]
    if missing:
        if result and not result.endswith("\n"):
            result += newline
        prefix = "export " if uses_export else ""
        for key in missing:
            result += f"{prefix}{key}={env_quote(values[key])}{newline}"
    return result
