"""The Secret Service, reached without loading the keyring library when it is the backend
keyring would pick anyway.

``driftdesk key`` runs on every key refresh of Claude Code and Codex, so its start-up is the
user's latency. Importing ``keyring`` takes ~0.1 s (its helpers pull in ``urllib.request`` and
``email``); with no backend configured it then imports every installed backend to choose one
(~0.15 s); its Secret Service backend then loads ``secretstorage`` and ``cryptography`` for an
encrypted session (~0.08 s). On Linux, when nothing names a backend (no
``PYTHON_KEYRING_BACKEND``, no keyring config file) and the Secret Service is running, keyring
would pick its Secret Service backend, so:

- ``read_password`` asks the Secret Service itself over D-Bus (``jeepney``, the library
  ``secretstorage`` is built on): the item with the attributes keyring's backend gives it
  (``service``, ``username``) in the default collection, its secret over a ``plain`` session.
  The secret then crosses the user's session bus unencrypted; only processes of the same user
  can watch that bus, and those can ask the Secret Service for the key directly anyway (see
  "Where keys may be" in docs/ARCHITECTURE.md). Only the common case is handled here: a running
  service, an unlocked item found. Anything else (locked, no default collection, no item, an
  error) returns ``FALL_BACK`` and keyring answers, with its prompts, messages and errors.
- ``keyring_would_pick_it`` tells ``providers.keys`` to use keyring's Secret Service backend
  directly instead of letting keyring import every backend to find it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from jeepney.io.blocking import DBusConnection

BUS_NAME = "org.freedesktop.secrets"
SERVICE_PATH = "/org/freedesktop/secrets"
DEFAULT_COLLECTION = "/org/freedesktop/secrets/aliases/default"  # as secretstorage opens it
SECRET_PREFIX = "org.freedesktop.Secret."
CALL_TIMEOUT_S = 5.0  # a running service answers in milliseconds


class _FallBack:
    """The fast path does not apply: let keyring answer."""


FALL_BACK: Final = _FallBack()


class SecretServiceTimeout(Exception):
    """The running Secret Service did not answer a call in time."""


def keyring_config_file() -> Path:
    """Where keyring reads its config on Linux (``keyring.util.platform_.config_root``)."""
    root = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(root, "python_keyring", "keyringrc.cfg")


def nothing_configured() -> bool:
    """Linux, and keyring would choose a backend by probing: none is configured, and none was
    chosen in this process already (``keyring.set_keyring`` or an earlier ``get_keyring``)."""
    core = sys.modules.get("keyring.core")
    return (
        sys.platform.startswith("linux")
        and not os.environ.get("PYTHON_KEYRING_BACKEND")
        and not keyring_config_file().exists()
        and (core is None or getattr(core, "_keyring_backend", None) is None)
    )


def _connect() -> DBusConnection | None:
    try:
        from jeepney.io.blocking import open_dbus_connection
    except ImportError:
        return None
    try:
        return open_dbus_connection(bus="SESSION")
    except Exception:  # no bus address, a dead socket, a refused handshake: keyring's call
        return None


def _call(
    connection: DBusConnection, path: str, interface: str, method: str, signature: str, *args: Any
) -> Any:
    """One method call of the Secret Service; the reply's body (``DBusErrorResponse`` on an
    error reply)."""
    from jeepney import DBusAddress, new_method_call
    from jeepney.wrappers import unwrap_msg

    address = DBusAddress(path, bus_name=BUS_NAME, interface=SECRET_PREFIX + interface)
    message = new_method_call(address, method, signature, args)
    try:
        reply = connection.send_and_get_reply(message, timeout=CALL_TIMEOUT_S)
    except TimeoutError as exc:
        raise SecretServiceTimeout(
            f"the Secret Service did not answer {method} within {CALL_TIMEOUT_S:g} s"
        ) from exc
    return unwrap_msg(reply)


def _is_running(connection: DBusConnection) -> bool:
    from jeepney.bus_messages import message_bus

    try:
        reply = connection.send_and_get_reply(
            message_bus.NameHasOwner(BUS_NAME), timeout=CALL_TIMEOUT_S
        )
    except Exception:
        return False
    return bool(reply.body and reply.body[0])


def _is_activatable(connection: DBusConnection) -> bool:
    from jeepney.bus_messages import message_bus

    try:
        reply = connection.send_and_get_reply(
            message_bus.ListActivatableNames(), timeout=CALL_TIMEOUT_S
        )
    except Exception:
        return False
    return bool(reply.body) and BUS_NAME in reply.body[0]


def keyring_would_pick_it() -> bool:
    """True when keyring's probe would end at its Secret Service backend: nothing configured
    and the service running or activatable (what keyring's own priority check asks)."""
    if not nothing_configured():
        return False
    connection = _connect()
    if connection is None:
        return False
    try:
        return _is_running(connection) or _is_activatable(connection)
    finally:
        connection.close()


def read_password(service: str, username: str) -> str | _FallBack | None:
    """The secret keyring's Secret Service backend would return for (service, username), or
    ``FALL_BACK`` when this fast path cannot tell (keyring then answers). Raises
    ``SecretServiceTimeout`` when the running service stops answering."""
    if not nothing_configured():
        return FALL_BACK
    connection = _connect()
    if connection is None:
        return FALL_BACK
    try:
        # A service that is not running is left to keyring: activating it (and waiting for a
        # daemon that may never start) is keyring's part, with its own time limit.
        if not _is_running(connection):
            return FALL_BACK
        from jeepney import DBusErrorResponse

        try:
            (items,) = _call(
                connection,
                DEFAULT_COLLECTION,
                "Collection",
                "SearchItems",
                "a{ss}",
                {"username": username, "service": service},
            )
            if not items:
                return FALL_BACK  # keyring creates a missing default collection, reports None
            _, session = _call(
                connection, SERVICE_PATH, "Service", "OpenSession", "sv", "plain", ("s", "")
            )
            # keyring's backend returns the first item found, as here
            ((_, _, value, _),) = _call(connection, items[0], "Item", "GetSecret", "o", session)
        except DBusErrorResponse:  # locked, gone, not supported: keyring unlocks and reports
            return FALL_BACK
        return bytes(value).decode("utf-8")
    finally:
        connection.close()
