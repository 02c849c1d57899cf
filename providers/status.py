"""Which profile each target points at, and whether its file changed since driftdesk wrote it."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from driftdesk.providers import locations, state
from driftdesk.providers.profiles import Profile
from driftdesk.providers.targets import (
    CODEX_PROJECT_IGNORED,
    CODEX_PROVIDER_PREFIX,
    ENV_OWNED,
    SwitchPlan,
)


@dataclass
class TargetStatus:
    target: str  # "claude" | "codex" | "env"
    scope: str  # "user" | "project" | "local" | "file"
    path: Path
    exists: bool
    profile: str | None  # the driftdesk profile the file points at, if any
    drifted: bool  # the file changed since driftdesk last wrote it
    detail: str = ""
    written_profile: str | None = None  # the profile driftdesk last wrote there
    written_at: str | None = None
    drifted_keys: str = ""  # "set env.X; removed theme": what changed since driftdesk's write

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["path"] = str(self.path)
        return out


def collect_status(project_dir: Path | None = None) -> list[TargetStatus]:
    """Claude Code's user/project/local settings, Codex's user/project config, ./.env, and any
    other file driftdesk wrote. Files that do not exist are listed only for the user scopes."""
    project = Path(project_dir) if project_dir else Path.cwd()
    candidates: list[tuple[str, str, Path]] = [
        ("claude", "user", locations.claude_settings_path("user")),
        ("claude", "project", locations.claude_settings_path("project", project)),
        ("claude", "local", locations.claude_settings_path("local", project)),
        ("codex", "user", locations.codex_config_path("user")),
        ("codex", "project", locations.codex_config_path("project", project)),
        ("env", "file", locations.env_file_path(None, project)),
    ]
    records = state.records()
    seen = {str(p.resolve()) for _, _, p in candidates}
    for key, written in records.items():
        if key not in seen:
            candidates.append((written.target, "file", Path(key)))
    out: list[TargetStatus] = []
    listed: set[str] = set()
    for target, scope, path in candidates:
        resolved = str(path.resolve())
        if resolved in listed:  # e.g. the project folder is the home folder
            continue
        listed.add(resolved)
        record = records.get(resolved)
        if not path.exists() and record is None and scope != "user":
            continue
        out.append(_status_of(target, scope, path, record))
    return out


def _status_of(
    target: str, scope: str, path: Path, record: state.WriteRecord | None
) -> TargetStatus:
    try:
        data: bytes | None = path.read_bytes()
    except FileNotFoundError:
        data = None
    except OSError as exc:
        return TargetStatus(target, scope, path, True, None, False, f"unreadable: {exc}")
    drifted = record is not None and (data is None or state.sha256_bytes(data) != record.sha256)
    status = TargetStatus(
        target,
        scope,
        path,
        data is not None,
        None,
        drifted,
        written_profile=record.profile if record else None,
        written_at=record.written_at if record else None,
    )
    if data is None:
        status.detail = "deleted since driftdesk wrote it" if record else "no file"
        return status
    text = data.decode("utf-8", errors="replace")
    if target == "claude":
        status.profile, status.detail = _claude_active(text)
    elif target == "codex" and scope == "project":
        status.profile, status.detail = None, codex_project_detail(text)
    elif target == "codex":
        status.profile, status.detail = _codex_active(text)
    else:
        status.profile, status.detail = _env_active(text, record)
    if drifted:
        written = state.written_bytes(path)
        if written is not None:
            from driftdesk.providers.changes import summarize

            status.drifted_keys = summarize(target, written.decode("utf-8", "replace"), text)
        status.detail = (status.detail + "; " if status.detail else "") + (
            f"changed since driftdesk wrote it at {record.written_at if record else '?'}"
        )
        if status.drifted_keys:
            status.detail += f" ({status.drifted_keys})"
    return status


def profile_from_helper(command: str) -> str | None:
    """``/path/driftdesk key NAME`` (or ``python -m driftdesk key NAME``) -> NAME."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if len(argv) >= 3 and argv[-2] == "key" and "driftdesk" in " ".join(argv[:-2]):
        return argv[-1]
    return None


def _claude_active(text: str) -> tuple[str | None, str]:
    try:
        settings = json.loads(text.lstrip("\ufeff"))
    except json.JSONDecodeError as exc:
        return None, f"does not parse: {exc}"
    except RecursionError:
        return None, "does not parse: nested too deeply"
    if not isinstance(settings, dict):
        return None, "not a JSON object"
    helper = settings.get("apiKeyHelper")
    env = settings.get("env") if isinstance(settings.get("env"), dict) else {}
    assert isinstance(env, dict)
    url = env.get("ANTHROPIC_BASE_URL")
    where = f"base URL {url}" if url else "default base URL"
    if isinstance(helper, str):
        name = profile_from_helper(helper)
        if name:
            return name, f"{where}, model {env.get('ANTHROPIC_MODEL', '(default)')}"
        return None, f"apiKeyHelper is not driftdesk's; {where}"
    return None, f"no apiKeyHelper; {where}"


def _codex_active(text: str) -> tuple[str | None, str]:
    import tomllib

    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return None, f"does not parse: {exc}"
    provider = config.get("model_provider")
    model = config.get("model", "(default)")
    if isinstance(provider, str) and provider.startswith(CODEX_PROVIDER_PREFIX):
        table = config.get("model_providers", {}).get(provider)
        if not isinstance(table, dict):
            return None, f"model_provider {provider} has no [model_providers.{provider}] table"
        return provider[len(CODEX_PROVIDER_PREFIX) :], f"model {model}, {table.get('base_url')}"
    return None, f"model_provider {provider or 'openai (default)'}, model {model}"


def codex_project_detail(text: str) -> str:
    """A project's .codex/config.toml selects no provider: Codex ignores the keys that would."""
    import tomllib

    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return f"does not parse: {exc}"
    ignored = [key for key in CODEX_PROJECT_IGNORED if key in config]
    if not ignored:
        return "no provider keys (Codex reads the provider from the user config only)"
    provider = config.get("model_provider")
    named = f" (model_provider {provider})" if isinstance(provider, str) else ""
    return (
        f"NOT ACTIVE{named}: Codex ignores {', '.join(ignored)} in a project config; "
        "use driftdesk exec NAME -- codex, or the user scope"
    )


def _env_active(text: str, record: state.WriteRecord | None) -> tuple[str | None, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("export "):
            stripped = stripped[len("export ") :].strip()
        name, sep, value = stripped.partition("=")
        if sep and name.strip() in ENV_OWNED:
            values[name.strip()] = value.strip().strip("\"'")
    detail = ", ".join(f"{k}={values[k]}" for k in ENV_OWNED if k in values) or "no OPENAI_* lines"
    if record is None or not record.profile:
        return None, detail
    from driftdesk.providers.profiles import ProfileError, ProfileStore

    try:
        profile = ProfileStore().get(record.profile)
    except ProfileError:
        return None, detail + f"; profile {record.profile} no longer exists"
    if values.get("OPENAI_BASE_URL") == profile.base_url and values.get("OPENAI_MODEL") == (
        profile.model
    ):
        return profile.name, detail
    return None, detail + f"; no longer matches profile {profile.name}"


def stale_switches(profile: Profile) -> list[SwitchPlan]:
    """Switch plans that would bring the files ``profile`` is switched into up to date with it
    (after an edit): one per file whose content the profile would now change."""
    from driftdesk.providers.errors import SwitchError
    from driftdesk.providers.targets import plan_switch

    plans = []
    for row in collect_status():
        if profile.name not in (row.profile, row.written_profile) or not row.exists:
            continue
        scope = row.scope if row.scope in ("user", "project", "local") else "user"
        if row.target != "env" and row.scope == "file":
            continue  # a file outside the usual places: named by status, not re-planned here
        try:
            plan = plan_switch(
                profile,
                row.target,
                scope="user" if row.target == "env" else scope,
                env_file=row.path if row.target == "env" else None,
            )
        except SwitchError:
            continue
        if plan.changed:
            plans.append(plan)
    return plans
