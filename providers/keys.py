"""API keys live in the OS keyring (service ``driftdesk``, user = profile name) and nowhere else.

There is deliberately no plaintext fallback: if the keyring backend is missing or locked we
raise ``KeyringUnavailable`` naming the backend problem, and the caller tells the user.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from driftdesk.providers import secret_service
from driftdesk.providers.errors import (
    KeyMissing,
    KeyringUnavailable,
    KeyUnusable,
    KeyWithheld,
    ProfileError,
)

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

DEFAULT_SERVICE = "driftdesk"
# Set by the rerun engine in every harness process it starts: such a process (and any Codex or
# Claude Code it launches, whose key helper runs `driftdesk key`) talks to the metering proxy
# with a throwaway key and must never obtain the real one.
RUN_CHILD_ENV = "DRIFTDESK_RUN_CHILD"


def service_name() -> str:
    # Tests give each case its own service inside a private, throwaway keyring.
    return os.environ.get("DRIFTDESK_KEYRING_SERVICE") or DEFAULT_SERVICE


def backend() -> KeyringBackend:
    """The active keyring backend, refusing ones that would store keys in plaintext or nowhere."""
    kr = _pick_backend()
    name = f"{type(kr).__module__}.{type(kr).__name__}"
    if "fail" in name.lower() or "null" in name.lower():
        raise KeyringUnavailable(
            f"no OS keyring backend is available ({name}): driftdesk keeps keys only in one "
            "and never falls back to a plain file. macOS: the login Keychain works as it is. "
            "Linux desktop: run GNOME Keyring or KeePassXC (a Secret Service). Headless server: "
            "start one in a D-Bus session (apt install gnome-keyring dbus; dbus-run-session -- "
            'bash; then eval "$(printf %s PASSWORD | gnome-keyring-daemon --unlock '
            '--components=secrets)"), or choose an encrypted file knowingly (pip install '
            "keyrings.cryptfile; PYTHON_KEYRING_BACKEND=keyrings.cryptfile.cryptfile."
            "CryptFileKeyring). A keyless endpoint needs none: profile add ... --no-key. "
            "See the README, 'Where keys are kept'"
        )
    if "plaintext" in name.lower() or "keyrings.alt" in name.lower():
        raise KeyringUnavailable(
            f"the keyring backend {name} stores secrets in plaintext; driftdesk refuses it. "
            "Configure a real OS keyring (PYTHON_KEYRING_BACKEND)."
        )
    return kr


def _pick_backend() -> KeyringBackend:
    """keyring's own choice, without its probe of every installed backend when the Secret
    Service is the one it would pick (see ``providers.secret_service``)."""
    if secret_service.keyring_would_pick_it():
        from keyring.backends import SecretService

        return SecretService.Keyring()
    import keyring

    try:
        return keyring.get_keyring()  # a configured backend, or keyring's probe
    except Exception as exc:  # a PYTHON_KEYRING_BACKEND naming no importable backend
        raise KeyringUnavailable(
            f"the keyring backend cannot be loaded ({type(exc).__name__}: {exc}); check "
            f"PYTHON_KEYRING_BACKEND={os.environ.get('PYTHON_KEYRING_BACKEND', '')!r} "
            "(e.g. keyring.backends.SecretService.Keyring) or unset it"
        ) from None


def _call(action: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return _within_deadline(action, fn, *args)
    except KeyringUnavailable:
        raise
    except Exception as exc:  # D-Bus errors surface as assorted exception types
        # keyring's error types are looked up only if keyring is loaded: the fast read path
        # of `driftdesk key` never imports it.
        errors = sys.modules.get("keyring.errors")
        if errors is not None and isinstance(exc, errors.PasswordDeleteError):
            raise
        if errors is not None and isinstance(exc, errors.KeyringLocked):
            raise KeyringUnavailable(
                f"the OS keyring is locked ({action}): unlock it and retry"
            ) from exc
        raise KeyringUnavailable(
            f"the OS keyring failed to {action}: {type(exc).__name__}: {exc}"
        ) from exc


KEYRING_TIMEOUT_S = 10.0  # DRIFTDESK_KEYRING_TIMEOUT overrides (seconds)


def _within_deadline(action: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or ``KeyringUnavailable`` if it has not answered in time: a Secret
    Service that D-Bus can activate but that never starts makes every call wait for the bus's
    own activation timeout (minutes). The call goes on in a daemon thread; we stop waiting."""
    try:
        limit = float(os.environ.get("DRIFTDESK_KEYRING_TIMEOUT") or KEYRING_TIMEOUT_S)
    except ValueError:
        limit = KEYRING_TIMEOUT_S
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=call, name="driftdesk-keyring", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise KeyringUnavailable(
            f"the OS keyring did not answer within {limit:g}s ({action}): its Secret Service "
            "may be starting or hung; check it (e.g. gnome-keyring-daemon) in your D-Bus "
            "session and retry"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def refuse_in_run_child() -> None:
    """Raise ``KeyWithheld`` when called from a process a driftdesk run started."""
    if RUN_CHILD_ENV in os.environ:
        raise KeyWithheld(
            f"{RUN_CHILD_ENV} is set: this process was started by a driftdesk run, which gives "
            "its harness a throwaway key and the metering proxy's URL; the real key is never "
            "handed out inside a run (so no call can bypass the proxy)"
        )


def get_key(profile: str) -> str:
    """The key for ``profile``; ``KeyMissing`` if none is stored; ``KeyWithheld`` in a run child."""
    refuse_in_run_child()
    value = _read_password(service_name(), profile)
    if not value:
        raise KeyMissing(
            f"no key for profile {profile!r} in the OS keyring "
            f"(service {service_name()!r}); set one with: driftdesk profile edit {profile} --key-stdin"
        )
    problem = key_problem(str(value))
    if problem:
        # Sent, it would make every request fail in the HTTP client (an older version stored
        # such keys): said here once, never blamed on the provider.
        raise KeyUnusable(
            f"the key stored for profile {profile!r} {problem} (not shown), which no HTTP "
            f"header can carry; store it again with: driftdesk profile edit {profile} --key-stdin"
        )
    return str(value)


_CONTROL_NAMES = {"\n": "a newline", "\r": "a carriage return", "\x00": "a NUL", "\t": "a tab"}


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be sent in an HTTP header (a control character), without showing it:
    "holds a newline at character 19 of 26"."""
    for position, char in enumerate(key, start=1):
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            name = _CONTROL_NAMES.get(char, f"the control character U+{code:04X}")
            return f"holds {name} at character {position} of {len(key)}"
    return None


def _read_password(service: str, profile: str) -> str | None:
    # Straight from the Secret Service when keyring would pick it anyway (no keyring import).
    value = _call("read a key", secret_service.read_password, service, profile)
    if value is not secret_service.FALL_BACK:
        return value
    kr = backend()
    return _call("read a key", kr.get_password, service, profile)


def has_key(profile: str) -> bool:
    try:
        get_key(profile)
    except KeyMissing:
        return False
    return True


def set_key(profile: str, key: str) -> None:
    key = key.strip()
    if not key:
        raise ValueError("refusing to store an empty key")
    problem = key_problem(key)
    if problem:
        raise ProfileError(
            f"the key given for profile {profile!r} {problem} (not shown), which no HTTP header "
            "can carry (two lines pasted?); nothing was stored: give the key alone"
        )
    kr = backend()
    _call("store a key", kr.set_password, service_name(), profile, key)


def delete_key(profile: str) -> bool:
    """Remove the profile's key; ``False`` if there was none."""
    import keyring.errors

    kr = backend()
    try:
        _call("delete a key", kr.delete_password, service_name(), profile)
    except keyring.errors.PasswordDeleteError:
        return False
    return True
