"""Turn a live config (Claude Code settings, Codex config, a .env file) into a profile.

A key found in the file goes to the OS keyring. With ``move_key`` it also leaves the file, after
a backup: Claude Code and Codex are switched to the new profile at the same time (their key then
comes from ``driftdesk key NAME``), so the tool keeps working; a .env file just loses the line
(``driftdesk exec`` hands the key over instead).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.providers import dotenv, locations, targets
from driftdesk.providers.errors import ImportProblem
from driftdesk.providers.keys import backend, set_key
from driftdesk.providers.profiles import Profile, ProfileError, ProfileStore, is_credential_header
from driftdesk.secrets import mask_key, redact

ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"
# Codex provider settings a profile cannot express: importing without them would change what
# is sent (Azure's api-version query parameter, headers read from the environment).
CODEX_UNEXPRESSIBLE = ("query_params", "env_http_headers")
# What an import reads from a Codex provider table (the rest is named in a note).
CODEX_IMPORTED = {
    "name",
    "base_url",
    "http_headers",
    "env_key",
    "env_key_instructions",
    "experimental_bearer_token",
    "wire_api",
    "auth",
}
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
SOURCES = ("claude", "codex", "env")


@dataclass
class ImportCandidate:
    source: str
    path: Path
    profile_fields: dict[str, Any]
    key: str | None = None
    key_where: str | None = None  # e.g. "env.ANTHROPIC_AUTH_TOKEN"; never the key itself
    key_in_file: bool = False  # False when the key came from elsewhere (auth.json, the shell)
    key_file: Path | None = None  # Codex's auth.json, when the key came from there
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # never print the key
        return f"ImportCandidate({self.source!r}, {str(self.path)!r}, key={mask_key(self.key)})"


@dataclass
class ImportResult:
    profile: Profile
    source_path: Path
    key_stored: bool
    key_masked: str | None
    key_moved: bool
    diff: str = ""
    notes: list[str] = field(default_factory=list)


def source_path(source: str, path: str | Path | None, scope: str = "user") -> Path:
    if path:
        return Path(path).expanduser()
    if source == "claude":
        return locations.claude_settings_path(scope)
    if source == "codex":
        return locations.codex_config_path("project" if scope == "project" else "user")
    if source == "env":
        return locations.env_file_path(None)
    raise ImportProblem(f"unknown import source {source!r}: expected one of {', '.join(SOURCES)}")


def inspect_source(source: str, path: str | Path | None, scope: str = "user") -> ImportCandidate:
    """Read the source and say what a profile would hold (the key stays in memory only)."""
    where = source_path(source, path, scope)
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ImportProblem(f"{where} does not exist") from exc
    except UnicodeDecodeError as exc:
        raise ImportProblem(f"{where} is not UTF-8 text") from exc
    if source == "claude":
        return _inspect_claude(where, text)
    if source == "codex":
        return _inspect_codex(where, text)
    return _inspect_env(where, text)


def _inspect_claude(path: Path, text: str) -> ImportCandidate:
    try:
        settings = json.loads(text.lstrip("\ufeff"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ImportProblem(f"{path} does not parse as JSON: {exc}") from exc
    env = settings.get("env") if isinstance(settings, dict) else None
    env = env if isinstance(env, dict) else {}
    model = env.get("ANTHROPIC_MODEL") or settings.get("model")
    if not model:
        raise ImportProblem(
            f'{path} names no model (env.ANTHROPIC_MODEL or "model"); set one there first'
        )
    headers: dict[str, str] = {}
    for line in str(env.get("ANTHROPIC_CUSTOM_HEADERS", "")).splitlines():
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip()] = value.strip()
    fields = {
        "protocol": "anthropic",
        "base_url": str(env.get("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT_URL),
        "model": str(model),
        "haiku_model": env.get("ANTHROPIC_DEFAULT_HAIKU_MODEL"),
        "sonnet_model": env.get("ANTHROPIC_DEFAULT_SONNET_MODEL"),
        "opus_model": env.get("ANTHROPIC_DEFAULT_OPUS_MODEL"),
        "headers": headers,
    }
    candidate = ImportCandidate("claude", path, fields)
    for name in targets.CLAUDE_KEY_ENV:
        if isinstance(env.get(name), str) and env[name].strip():
            candidate.key, candidate.key_where, candidate.key_in_file = (
                env[name].strip(),
                f"env.{name}",
                True,
            )
            break
    return candidate


def _inspect_codex(path: Path, text: str) -> ImportCandidate:
    import os

    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ImportProblem(f"{path} does not parse as TOML: {exc}") from exc
    provider_id = str(config.get("model_provider") or "openai")
    model = config.get("model")
    if not model:
        raise ImportProblem(f"{path} has no top-level model = ...; set one there first")
    providers = config.get("model_providers", {})
    table = providers.get(provider_id) if isinstance(providers, dict) else None
    if table is None and provider_id != "openai":
        raise ImportProblem(f"{path}: model_provider {provider_id!r} has no table")
    table = table if isinstance(table, dict) else {}
    blocking = {k: table[k] for k in CODEX_UNEXPRESSIBLE if table.get(k)}
    if blocking:
        # A profile cannot carry these yet; dropping them would send requests without them.
        raise ImportProblem(
            f"{path}: [model_providers.{provider_id}] sets {', '.join(blocking)} "
            f"({', '.join(str(k) for v in blocking.values() if isinstance(v, dict) for k in v)}), "
            "which a driftdesk profile cannot carry yet: not imported (nothing was stored). "
            "Keep using that provider from your config.toml, or make a profile by hand with "
            "driftdesk profile add if the endpoint works without them"
        )
    fields: dict[str, Any] = {
        "protocol": "openai",
        "base_url": str(table.get("base_url") or OPENAI_DEFAULT_URL),
        "model": str(model),
        "headers": {str(k): str(v) for k, v in dict(table.get("http_headers", {})).items()},
    }
    keyless = _keyless_driftdesk_profile(table)
    if keyless:
        fields["no_key"] = True
    candidate = ImportCandidate("codex", path, fields)
    if keyless:
        candidate.notes.append(
            f"this provider is driftdesk's keyless profile {keyless!r}: imported keyless too"
        )
    left_out = sorted(set(table) - CODEX_IMPORTED)
    if left_out:
        candidate.notes.append(
            f"not imported from [model_providers.{provider_id}]: {', '.join(left_out)} (a "
            "profile has no such setting; a switch writes its own table and keeps yours)"
        )
    if table.get("env_key") and not os.environ.get(str(table["env_key"])):
        candidate.notes.append(
            f"env_key names ${table['env_key']}, which is not set in this shell: no key was "
            "imported; store one with driftdesk profile edit NAME --key-stdin"
        )
    token = table.get("experimental_bearer_token")
    if isinstance(token, str) and token.strip():
        candidate.key = token.strip()
        candidate.key_where = f"model_providers.{provider_id}.experimental_bearer_token"
        candidate.key_in_file = True
    elif table.get("env_key") and os.environ.get(str(table["env_key"])):
        candidate.key = os.environ[str(table["env_key"])].strip()
        candidate.key_where = f"${table['env_key']} (from the shell, named by env_key)"
    elif provider_id == "openai":
        auth = path.parent / "auth.json"
        try:
            stored = json.loads(auth.read_text(encoding="utf-8")).get("OPENAI_API_KEY")
        except (OSError, json.JSONDecodeError, AttributeError):
            stored = None
        if isinstance(stored, str) and stored.strip():
            candidate.key = stored.strip()
            candidate.key_where = f"{auth} (OPENAI_API_KEY)"
            candidate.key_file = auth
    return candidate


def _keyless_driftdesk_profile(table: dict[str, Any]) -> str | None:
    """The profile a switch wrote this provider table for, when that profile is keyless: its
    key helper answers a placeholder, so the copy needs no key either."""
    auth = table.get("auth")
    if not isinstance(auth, dict) or not str(table.get("name", "")).startswith("driftdesk: "):
        return None
    args = [str(a) for a in auth.get("args", [])]
    if len(args) < 2 or args[-2] != "key":
        return None
    try:
        return args[-1] if ProfileStore().get(args[-1]).no_key else None
    except ProfileError:
        return None


def _inspect_env(path: Path, text: str) -> ImportCandidate:
    values: dict[str, str] = {}
    key_names: tuple[str, ...]
    for key, value in dotenv.assigned_values(dotenv.parse_env_lines(text, path)):
        values[key] = value
    if values.get("OPENAI_MODEL") or values.get("OPENAI_BASE_URL") or values.get("OPENAI_API_KEY"):
        protocol, prefix, key_names = "openai", "OPENAI", ("OPENAI_API_KEY",)
        default_url = OPENAI_DEFAULT_URL
    elif any(k.startswith("ANTHROPIC_") for k in values):
        protocol, prefix, key_names = "anthropic", "ANTHROPIC", targets.CLAUDE_KEY_ENV
        default_url = ANTHROPIC_DEFAULT_URL
    else:
        raise ImportProblem(f"{path} sets no OPENAI_* or ANTHROPIC_* variables")
    model = values.get(f"{prefix}_MODEL")
    if not model:
        raise ImportProblem(f"{path} has no {prefix}_MODEL line; add one first")
    fields = {
        "protocol": protocol,
        "base_url": values.get(f"{prefix}_BASE_URL") or default_url,
        "model": model,
    }
    candidate = ImportCandidate("env", path, fields)
    for name in key_names:
        if values.get(name):
            candidate.key, candidate.key_where, candidate.key_in_file = values[name], name, True
            break
    return candidate


def import_profile(
    source: str,
    path: str | Path | None = None,
    name: str | None = None,
    move_key: bool = False,
    scope: str = "user",
    store: ProfileStore | None = None,
) -> ImportResult:
    """Create profile ``name`` from the source; store its key; optionally move the key out.

    ``path`` None: the source's usual file; ``name`` None: ``<source>-<host>`` (made unique).
    """
    store = store or ProfileStore()
    found = inspect_source(source, path, scope)
    if name is None:
        name = _default_name(store, source, str(found.profile_fields["base_url"]))
    if store.exists(name):
        raise ProfileError(f"profile {name!r} exists; pick another --name or remove it first")
    notes = list(found.notes)
    fields = dict(found.profile_fields)
    headers = dict(fields.get("headers") or {})
    for header in [h for h in headers if is_credential_header(h)]:
        # Kept out of the profile (stored in plain text); a switch rewrites the file's headers.
        del headers[header]
        notes.append(
            f"header {header} carries a credential and was not imported; "
            f"put the key in the keyring: driftdesk profile edit {name} --key-stdin"
        )
    fields["headers"] = headers
    profile = Profile(name=name, **fields)
    profile.validate()
    plan = None
    if found.key and move_key and found.key_in_file:
        plan = _plan_move(found, profile)  # refuses before anything is stored
    if found.key:
        backend()
        set_key(name, found.key)
    store.save(profile)
    if not found.key and not profile.no_key:
        notes.append(f"no key found; add one with: driftdesk profile edit {name} --key-stdin")
    elif found.key_in_file and not move_key:
        notes.append(
            f"the key is still in {found.path} ({found.key_where}); "
            "rerun with --move-key to take it out (after a backup)"
        )
    diff = ""
    if found.key and found.key_file is not None:
        if move_key:
            notes.extend(_move_out_of_auth_json(found, profile))
        else:
            notes.append(
                f"the key is still in {found.key_file}, Codex's login file; rerun with "
                "--move-key to take it out (after a backup; Codex then gets it from driftdesk)"
            )
    if plan is not None:
        targets.apply_switch(plan)
        diff = plan.diff
        notes.append(f"moved the key out of {plan.path} (backup under driftdesk's data dir)")
    return ImportResult(
        profile=profile,
        source_path=found.path,
        key_stored=bool(found.key),
        key_masked=mask_key(found.key) if found.key else None,
        key_moved=plan is not None,
        diff=diff,
        notes=notes,
    )


def _move_out_of_auth_json(found: ImportCandidate, profile: Profile) -> list[str]:
    """Point Codex at the new profile (its key through ``driftdesk key``), then blank
    OPENAI_API_KEY in auth.json (the rest of Codex's login file stays). Both backed up."""
    from driftdesk.providers import jsonsplice

    auth = found.key_file
    assert auth is not None
    config_old = targets.read_text(found.path)
    config_new = targets.edit_codex_config(config_old, profile, found.path)
    text = targets.read_text(auth) or ""
    try:
        _, top = jsonsplice.parse_document(text)
    except jsonsplice.JsonEditError as exc:
        raise ImportProblem(f"{auth} does not parse ({exc}); left untouched") from exc
    blanked = jsonsplice.set_member(text, top, "OPENAI_API_KEY", "null")
    targets.apply_edit(found.path, "codex", config_old, config_new, profile.name, "import")
    targets.apply_edit(auth, "claude", text, blanked, profile.name, "move-key")
    return [
        f"switched {found.path} to profile {profile.name} (its key comes from driftdesk key)",
        f"moved the key out of {auth} (OPENAI_API_KEY is now null; backed up first)",
    ]


def _default_name(store: ProfileStore, source: str, base_url: str) -> str:
    import re
    from urllib.parse import urlsplit

    host = re.sub(r"[^A-Za-z0-9_.-]+", "-", urlsplit(base_url).hostname or "local").strip("-.")
    stem = f"{source}-{host}"[:60]
    name, counter = stem, 2
    while store.exists(name):
        name, counter = f"{stem}-{counter}", counter + 1
    return name


def _plan_move(found: ImportCandidate, profile: Profile) -> targets.SwitchPlan:
    path = found.path
    old = targets.read_text(path)
    assert old is not None and found.key is not None
    if found.source == "claude":
        new = targets.edit_claude_settings(old, profile, path)
    elif found.source == "codex":
        new = targets.edit_codex_config(_without_codex_token(old, path), profile, path)
    else:
        kept = [
            line.text
            for line in dotenv.parse_env_lines(old, path)
            if line.key not in ("OPENAI_API_KEY", *targets.CLAUDE_KEY_ENV)
        ]
        new = "".join(kept)
    other_keys = targets.unsaved_keys(
        targets.removed_keys(found.source, old, new), saved=(found.key,)
    )
    if other_keys:
        # Moving one key out must not destroy another (backups keep keys masked).
        raise ImportProblem(
            f"{path} also holds {', '.join(other_keys)}, another key that --move-key would "
            "remove and that no profile has in the keyring; keep only the key you want to "
            "import in the file (or import without --move-key); nothing was changed"
        )
    shown_secrets = [found.key, *targets.secret_values(found.source, old, path)]
    diff = redact(targets.unified_diff(path, old, new), shown_secrets)
    return targets.SwitchPlan(
        target=found.source,
        path=path,
        old_text=old,
        new_text=new,
        diff=diff,
        changed=new != old,
        profile=profile.name,
    )


def _without_codex_token(text: str, path: Path) -> str:
    import tomlkit

    doc = tomlkit.parse(text)
    provider_id = str(doc.get("model_provider") or "openai")
    table = doc.get("model_providers", {}).get(provider_id)
    if table is not None and "experimental_bearer_token" in table:
        del table["experimental_bearer_token"]
    return tomlkit.dumps(doc)
