"""The private test keyring survives what took it down in CI: its daemon is out of the tests'
process group, and if it dies anyway the guard brings it back with the stored keys.

Each test runs in a D-Bus session of its own (``dbus-run-session`` + ``tests/with-keyring.sh``),
so killing that session's daemon never touches the keyring the rest of the suite uses."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    sys.path.insert(0, sys.argv[1])
    import keyring
    from keyring_guard import KeyringGuard
    from processes import alive

    guard = KeyringGuard(os.environ["DRIFTDESK_TEST_KEYRING_HOME"],
                         os.environ["DRIFTDESK_TEST_KEYRING_PASSWORD"])
    try:
        assert guard.healthy() and not guard.ensure()
        daemon = guard._owner_pid()
        print("own-group", os.getpgid(daemon) != os.getpgrp())
        print("own-control", os.environ.get("GNOME_KEYRING_CONTROL") == guard.control_directory)
        keyring.set_password("guard-test", "u", "stored-before")
        os.kill(daemon, signal.SIGKILL)
        # kill() returns before the daemon has exited; ask only once it is gone or a zombie.
        deadline = time.monotonic() + 10
        while alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.01)
        print("healthy-after-death", guard.healthy())
        print("restarted", guard.ensure(), guard.healthy(), guard._owner_pid() != daemon)
        print("read-back", keyring.get_password("guard-test", "u"))
        keyring.set_password("guard-test", "w", "y")
        print("store-after-restart", keyring.get_password("guard-test", "w"))
    except BaseException:
        print(guard.diagnostics(), file=sys.stderr)
        raise
    """
)


def _needs_gnome_keyring() -> None:
    if shutil.which("gnome-keyring-daemon") is None:
        # ./run tests (and so .ci/run) installs it and says so: there, never a skip.
        message = "gnome-keyring is not installed: apt-get install gnome-keyring"
        required = os.environ.get("CI") or os.environ.get("DRIFTDESK_REQUIRE_KEYRING") == "1"
        pytest.fail(message) if required else pytest.skip(message)


def _kill_and_restart_in_a_private_session(tmp_path: Path, **env_extra: str) -> list[str]:
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"} | env_extra
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:  # files: daemons keep no pipe open
        done = subprocess.run(
            ["dbus-run-session", "--", "bash", str(TESTS / "with-keyring.sh"),
             sys.executable, str(script), str(TESTS)],
            stdout=stdout, stderr=stderr, env=env, timeout=180,
        )  # fmt: skip
    assert done.returncode == 0, out.read_text() + err.read_text()[-5000:]
    lines = out.read_text().splitlines()
    assert "own-group True" in lines
    assert "own-control True" in lines
    assert "healthy-after-death False" in lines
    assert "restarted True True True" in lines
    assert "read-back stored-before" in lines
    assert "store-after-restart y" in lines
    return lines


def test_a_dead_test_keyring_is_restarted_with_its_keys(tmp_path: Path) -> None:
    _needs_gnome_keyring()
    _kill_and_restart_in_a_private_session(tmp_path)


def test_the_test_keyring_leaves_the_users_own_keyring_alone(tmp_path: Path) -> None:
    """With ``XDG_RUNTIME_DIR`` set (a desktop, some CI runners), gnome-keyring's default control
    socket is ``$XDG_RUNTIME_DIR/keyring/control``, shared by every daemon of the user. The
    test keyring must neither take that socket over nor, restarting, tell its owner to quit."""
    _needs_gnome_keyring()
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    env |= {"XDG_RUNTIME_DIR": str(runtime), "XDG_DATA_HOME": str(tmp_path / "user-data")}
    env.pop("GNOME_KEYRING_CONTROL", None)
    log = (tmp_path / "user-daemon.log").open("w")
    users_daemon = subprocess.Popen(  # the user's own keyring, in a session bus of its own
        ["dbus-run-session", "--", "gnome-keyring-daemon", "--foreground", "--components=secrets"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        socket = runtime / "keyring" / "control"
        deadline = time.monotonic() + 20
        while not socket.exists():
            assert users_daemon.poll() is None and time.monotonic() < deadline, "no user daemon"
            time.sleep(0.05)
        inode = socket.stat().st_ino
        _kill_and_restart_in_a_private_session(tmp_path / "probe", XDG_RUNTIME_DIR=str(runtime))
        assert users_daemon.poll() is None, "the user's keyring daemon was told to quit"
        assert socket.exists() and socket.stat().st_ino == inode, "its control socket was taken"
    finally:
        os.killpg(users_daemon.pid, signal.SIGTERM)
        users_daemon.wait(timeout=20)
        log.close()


def test_the_guard_watches_the_keyring_in_every_test_process() -> None:
    # Under ./run tests (with-keyring.sh), every pytest process, xdist workers included, has
    # the guard; a worker without it would let a dead keyring fail dozens of tests again.
    if os.environ.get("DRIFTDESK_REQUIRE_KEYRING") != "1":
        pytest.skip("not under tests/with-keyring.sh")
    import keyring_guard

    assert keyring_guard.ACTIVE is not None
