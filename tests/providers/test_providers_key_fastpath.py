"""`driftdesk key` reads the Secret Service directly when keyring would pick it anyway, and
leaves every other case to keyring: real keyring, real subprocesses, real D-Bus.

Speed itself is measured by tests/benchmarks/bench_key.py; these tests pin what the fast path
must keep: the same item as keyring's backend, keyring's choice when a backend is configured or
the Secret Service is absent, and the same messages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.keyring

MODULES_PROBE = (
    "import sys\n"
    "from driftdesk.cli.main import main\n"
    "code = main(['key', sys.argv[1]])\n"
    "sys.stdout.flush()\n"
    "print('loaded:', sorted(m for m in ('keyring', 'secretstorage', 'cryptography') "
    "if m in sys.modules), file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


def _key_command(name: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", MODULES_PROBE, name],
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        timeout=60,
    )


def _profile(name: str = "work") -> None:
    """The profile a key belongs to (`driftdesk key` names an unknown profile as such)."""
    from driftdesk.providers.profiles import Profile, ProfileStore

    ProfileStore().save(Profile(name, "openai", "http://127.0.0.1:9/v1", "m"))


def test_key_stored_by_the_keyring_library_is_read_without_loading_it(home: Any) -> None:
    import keyring

    key = "sk-fast-" + os.urandom(8).hex()
    # Stored through keyring's own probe (what older driftdesk versions and other tools do).
    keyring.get_keyring().set_password(home.keyring_service, "work", key)
    result = _key_command("work")
    assert result.returncode == 0, result.stderr
    assert result.stdout == key + "\n"
    assert "loaded: []" in result.stderr, result.stderr


def test_key_stored_by_driftdesk_is_found_by_keyrings_own_probe(home: Any) -> None:
    import keyring

    from driftdesk.providers import keys

    key = "sk-set-" + os.urandom(8).hex()
    keys.set_key("work", key)
    assert keyring.get_keyring().get_password(home.keyring_service, "work") == key
    assert keys.get_key("work") == key
    assert keys.delete_key("work") is True
    assert keyring.get_keyring().get_password(home.keyring_service, "work") is None
    assert keys.delete_key("work") is False


def test_missing_key_gives_keyrings_answer(home: Any, cli: Callable[..., Any]) -> None:
    _profile("nobody")
    result = cli("key", "nobody")
    assert result.returncode == 1 and result.stdout == ""
    assert "no key for profile 'nobody'" in result.stderr


def test_a_configured_backend_is_honoured(home: Any) -> None:
    from driftdesk.providers import keys

    _profile()
    keys.set_key("work", "sk-configured-" + os.urandom(8).hex())
    config = home.root / ".config" / "python_keyring" / "keyringrc.cfg"
    config.parent.mkdir(parents=True)
    config.write_text("[backend]\ndefault-keyring=keyring.backends.fail.Keyring\n")
    result = _key_command("work")
    assert result.returncode == 1 and result.stdout == ""
    assert "no OS keyring backend is available (keyring.backends.fail.Keyring)" in result.stderr
    assert "never falls back" in result.stderr


def test_python_keyring_backend_is_honoured(home: Any) -> None:
    from driftdesk.providers import keys

    _profile()
    keys.set_key("work", "sk-env-" + os.urandom(8).hex())
    env = dict(os.environ, PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    result = _key_command("work", env)
    assert result.returncode == 1 and result.stdout == ""
    assert "keyring.backends.null.Keyring" in result.stderr


def test_no_secret_service_on_the_bus_is_left_to_keyring(home: Any) -> None:
    from driftdesk.providers import keys

    _profile()
    keys.set_key("work", "sk-nobus-" + os.urandom(8).hex())
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=f"unix:path={home.root}/no-bus")
    result = _key_command("work", env)
    assert result.returncode == 1 and result.stdout == ""
    assert "no OS keyring backend is available" in result.stderr
    assert "never falls back" in result.stderr


def test_key_command_refused_in_a_run_child(home: Any) -> None:
    from driftdesk.providers import keys

    key = "sk-child-" + os.urandom(8).hex()
    keys.set_key("work", key)
    result = _key_command("work", dict(os.environ, DRIFTDESK_RUN_CHILD="run-1"))
    assert result.returncode == 1 and key not in result.stdout + result.stderr
    assert "DRIFTDESK_RUN_CHILD" in result.stderr


def test_a_backend_set_in_process_is_honoured(home: Any) -> None:
    import keyring
    from keyring.backends import fail

    from driftdesk.providers import keys
    from driftdesk.providers.errors import KeyringUnavailable

    keys.set_key("work", "sk-inproc-" + os.urandom(8).hex())
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        with pytest.raises(KeyringUnavailable, match=r"keyring\.backends\.fail\.Keyring"):
            keys.get_key("work")
    finally:
        keyring.set_keyring(previous)
    assert keys.get_key("work").startswith("sk-inproc-")
