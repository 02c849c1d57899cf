"""Provider profiles: what a run or a switch points at. Stored in driftdesk's own TOML file.

The file (``$XDG_CONFIG_HOME/driftdesk/config.toml``) is edited with tomlkit so comments a user
adds by hand survive our writes. It never holds a key: keys are in ``providers.keys``.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomlkit
import tomlkit.exceptions

from driftdesk import paths
from driftdesk.fileio import atomic_write_text
from driftdesk.filelock import locked
from driftdesk.providers.errors import ConfigFileError, ProfileError, ProfileNotFound
from driftdesk.providers.harness_env import pass_env_problem

Protocol = Literal["openai", "anthropic"]
PROTOCOLS: tuple[str, ...] = ("openai", "anthropic")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
# Extra headers are stored in plain text (config file, Claude's ANTHROPIC_CUSTOM_HEADERS, Codex's
# http_headers): none may carry a credential.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})
_CREDENTIAL_WORDS = ("token", "secret", "key", "cookie", "auth", "pass", "credential", "session")
# How the key travels: Anthropic's API takes ``x-api-key``, many gateways in front of it take a
# bearer token instead; OpenAI-style clients (the openai SDK, Codex) only send a bearer token.
AUTH_HEADERS: tuple[str, ...] = ("x-api-key", "bearer")


# The key variables of each protocol, by header: the Anthropic SDKs and Claude Code send
# ANTHROPIC_API_KEY as x-api-key and ANTHROPIC_AUTH_TOKEN as a bearer token. A stale one from
# the shell must not reach a profile's endpoint.
KEY_VARIABLES: dict[str, dict[str, str]] = {
    "anthropic": {"x-api-key": "ANTHROPIC_API_KEY", "bearer": "ANTHROPIC_AUTH_TOKEN"},
    "openai": {"bearer": "OPENAI_API_KEY"},
}


def default_auth_header(protocol: str) -> str:
    return "x-api-key" if protocol == "anthropic" else "bearer"


def is_credential_header(name: str) -> bool:
    """Does a header of this name carry a credential (so it must never be stored in a file)?"""
    lowered = name.strip().lower()
    return lowered in CREDENTIAL_HEADERS or any(word in lowered for word in _CREDENTIAL_WORDS)


def credential_header_problem(profile_name: str, header: str) -> str:
    return (
        f"header {header!r} carries a credential, and extra headers are stored in plain text; "
        "keys live in the OS keyring only (driftdesk sends the key as Authorization / x-api-key "
        f"itself): driftdesk profile edit {profile_name} --key-stdin"
    )


# How runs treat a link fault before the first byte (the engine's reruns/link_absorb.py
# owns what each means; a profile only stores one).
LINK_FAULT_MODES = ("absorb", "retry")


@dataclass
class Profile:
    name: str
    protocol: str
    base_url: str
    model: str
    haiku_model: str | None = None
    sonnet_model: str | None = None
    opus_model: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    # "x-api-key" or "bearer"; None (profiles saved before the choice existed): the protocol's
    # default, see ``auth``.
    auth_header: str | None = None
    no_key: bool = False  # a keyless endpoint (local vLLM / Ollama): no key is sent or asked for
    # ``record_bodies = false``: runs keep no call recordings (what each call said). None: not
    # set (recordings on); a save leaves the stored setting as it is, so a form that does not
    # know the field never drops it.
    record_bodies: bool | None = None
    # ``inject = "429=5%,500=2%"``: runs of this profile inject these faults at the proxy
    # (driftdesk.reruns.injection; ``--inject`` overrides it). None: not set.
    inject: str | None = None
    # ``link_faults = "absorb"`` or ``"retry"``: what runs of this profile do with a link fault
    # before the first byte (driftdesk.reruns.link_absorb; ``--link-faults`` overrides it).
    # None: not set (the agent kind's default).
    link_faults: str | None = None
    # ``pass_env = ["HF_TOKEN", "AWS_*"]``: variables (names or globs) a harness of this
    # profile's runs gets beyond the allow-list (driftdesk.providers.harness_env). Written
    # only when set, so a form that does not know the field never drops it.
    pass_env: list[str] = field(default_factory=list)

    @property
    def records_bodies(self) -> bool:
        return self.record_bodies is not False

    @property
    def auth(self) -> str:
        """The header the key travels in: "x-api-key" or "bearer"."""
        return self.auth_header or default_auth_header(self.protocol)

    def validate(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ProfileError(
                f"invalid profile name {self.name!r}: use letters, digits, '.', '_' or '-' "
                "(at most 64, starting with a letter or digit)"
            )
        if self.link_faults not in (None, *LINK_FAULT_MODES):
            raise ProfileError(f"invalid link_faults {self.link_faults!r}: use absorb or retry")
        if self.protocol not in PROTOCOLS:
            raise ProfileError(
                f"invalid protocol {self.protocol!r}: expected one of {', '.join(PROTOCOLS)}"
            )
        if not re.match(r"^https?://[^\s/]+", self.base_url or ""):
            raise ProfileError(f"invalid base URL {self.base_url!r}: expected http(s)://host/...")
        if not self.model:
            raise ProfileError("a profile needs a model")
        if self.auth_header is not None and self.auth_header not in AUTH_HEADERS:
            raise ProfileError(
                f"invalid auth header {self.auth_header!r}: expected one of {', '.join(AUTH_HEADERS)}"
            )
        if self.protocol == "openai" and self.auth == "x-api-key":
            raise ProfileError(
                "openai profiles send the key as a bearer token (the openai SDK and Codex know no "
                "other way): use --auth-header bearer"
            )
        problem = pass_env_problem(self.pass_env)
        if problem:
            raise ProfileError(f"profile {self.name!r}: {problem}")
        for header in self.headers:
            if is_credential_header(header):
                raise ProfileError(
                    credential_header_problem(self.name, header)
                    + " (remove stored ones with --clear-headers)"
                )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_OPTIONAL_FIELDS = ("haiku_model", "sonnet_model", "opus_model")


def _from_table(name: str, table: dict[str, Any]) -> Profile:
    return Profile(
        name=name,
        protocol=str(table.get("protocol", "")),
        base_url=str(table.get("base_url", "")),
        model=str(table.get("model", "")),
        haiku_model=table.get("haiku_model"),
        sonnet_model=table.get("sonnet_model"),
        opus_model=table.get("opus_model"),
        headers={str(k): str(v) for k, v in dict(table.get("headers", {})).items()},
        notes=str(table.get("notes", "")),
        auth_header=str(table["auth_header"]) if table.get("auth_header") else None,
        no_key=bool(table.get("no_key", False)),
        record_bodies=_flag(table["record_bodies"]) if "record_bodies" in table else None,
        inject=str(table["inject"]) if table.get("inject") else None,
        link_faults=str(table["link_faults"]) if table.get("link_faults") else None,
        # kept as written: ``validate`` says what is wrong with it, when it is used
        pass_env=_written_list(table["pass_env"]) if "pass_env" in table else [],
    )


def _written_list(value: Any) -> Any:
    """A hand-written TOML array as a plain list; anything else as it is (for ``validate``)."""
    return [v for v in value] if isinstance(value, list) else value


def _flag(value: Any) -> bool:
    """A hand-written TOML setting: a boolean, or words such as "false" / "no"."""
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "no", "off", "0", "")
    return bool(value)


class ProfileStore:
    """Profiles in ``[profiles.<name>]`` tables of driftdesk's config file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.config_file()

    def _load(self) -> tomlkit.TOMLDocument:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return tomlkit.document()
        try:
            return tomlkit.parse(text)
        except tomlkit.exceptions.ParseError as exc:
            raise ConfigFileError(
                f"{self.path} does not parse as TOML ({exc}); fix it by hand — driftdesk left it untouched"
            ) from exc

    def _save(self, doc: tomlkit.TOMLDocument) -> None:
        atomic_write_text(self.path, tomlkit.dumps(doc))

    def all(self) -> list[Profile]:
        doc = self._load()
        table = doc.get("profiles", {})
        return [_from_table(name, dict(t)) for name, t in table.items()]

    def names(self) -> list[str]:
        return [p.name for p in self.all()]

    def get(self, name: str) -> Profile:
        doc = self._load()
        table = doc.get("profiles", {})
        if name not in table:
            known = ", ".join(table.keys()) or "none yet"
            raise ProfileNotFound(f"no profile named {name!r} (profiles: {known})")
        return _from_table(name, dict(table[name]))

    def exists(self, name: str) -> bool:
        return name in self._load().get("profiles", {})

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        # Read-modify-write under one lock, so two writers (processes or TUI workers) never
        # drop each other's profiles.
        return locked(f"profiles-{self.path}")

    def save(self, profile: Profile) -> None:
        """Create or replace ``profile`` (its table is updated in place, keeping comments)."""
        profile.validate()
        with self._locked():
            self._save_unlocked(profile)

    def _save_unlocked(self, profile: Profile) -> None:
        doc = self._load()
        if "profiles" not in doc:
            doc["profiles"] = tomlkit.table(is_super_table=True)
        profiles = doc["profiles"]
        assert isinstance(profiles, dict)
        if profile.name not in profiles:
            profiles[profile.name] = tomlkit.table()
        table = profiles[profile.name]
        values: dict[str, Any] = {
            "protocol": profile.protocol,
            "base_url": profile.base_url,
            "model": profile.model,
        }
        for key in _OPTIONAL_FIELDS:
            values[key] = getattr(profile, key)
        values["notes"] = profile.notes or None
        values["auth_header"] = profile.auth_header
        values["no_key"] = True if profile.no_key else None
        if profile.record_bodies is not None:
            table["record_bodies"] = profile.record_bodies
        values["inject"] = profile.inject  # None: no injection (a cleared setting goes)
        values["link_faults"] = profile.link_faults  # None: the agent kind's default
        if profile.pass_env:
            table["pass_env"] = list(profile.pass_env)
        for key, value in values.items():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        if profile.headers:
            table["headers"] = dict(profile.headers)
        else:
            table.pop("headers", None)
        self._save(doc)

    def remove(self, name: str) -> None:
        with self._locked():
            doc = self._load()
            profiles = doc.get("profiles", {})
            if name not in profiles:
                raise ProfileNotFound(f"no profile named {name!r}")
            del profiles[name]
            self._save(doc)
