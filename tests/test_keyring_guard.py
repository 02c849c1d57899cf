"""The private test keyring survives what took it down in CI: its daemon is out of the tests'
process group, and if it dies anyway the guard brings it back with the stored keys.

Each test runs in a D-Bus session of its own (``dbus-run-session`` + ``tests/with-keyring.sh``),
so killing that session's daemon never touches the keyring the rest of the suite uses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    import keyring
    from keyring_guard import KeyringGuard

    guard = KeyringGuard(os.environ["DRIFTDESK_TEST_KEYRING_HOME"],
                         os.environ["DRIFTDESK_TEST_KEYRING_PASSWORD"])
    assert guard.healthy() and not guard.ensure()
    daemon = guard._owner_pid()
    print("own-group", os.getpgid(daemon) != os.getpgrp())
    keyring.set_password("guard-test", "u", "stored-before")
    os.kill(daemon, signal.SIGKILL)
    print("healthy-after-death", guard.healthy())
    print("restarted", guard.ensure(), guard.healthy(), guard._owner_pid() != daemon)
    print("read-back", keyring.get_password("guard-test", "u"))
    keyring.set_password("guard-test", "w", "y")
    print("store-after-restart", keyring.get_password("guard-test", "w"))
    """
)


def test_a_dead_test_keyring_is_restarted_with_its_keys(tmp_path: Path) -> None:
    if shutil.which("gnome-keyring-daemon") is None:  # .ci/run installs it: CI must not skip
        message = "gnome-keyring is not installed: apt-get install gnome-keyring"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:  # files: daemons keep no pipe open
        done = subprocess.run(
            ["dbus-run-session", "--", "bash", str(TESTS / "with-keyring.sh"),
             sys.executable, str(script), str(TESTS)],
            stdout=stdout, stderr=stderr, env=env, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, err.read_text()[-3000:]
    lines = out.read_text().splitlines()
    assert "own-group True" in lines
    assert "healthy-after-death False" in lines
    assert "restarted True True True" in lines
    assert "read-back stored-before" in lines
    assert "store-after-restart y" in lines


def test_the_guard_watches_the_keyring_in_every_test_process() -> None:
    # Under ./run tests (with-keyring.sh), every pytest process, xdist workers included, has
    # the guard; a worker without it would let a dead keyring fail dozens of tests again.
    if os.environ.get("DRIFTDESK_REQUIRE_KEYRING") != "1":
        pytest.skip("not under tests/with-keyring.sh")
    import keyring_guard

    assert keyring_guard.ACTIVE is not None
