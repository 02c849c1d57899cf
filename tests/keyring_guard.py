"""Keeps the private test keyring (``tests/with-keyring.sh``) alive for the whole test run.

If its gnome-keyring-daemon dies, the next Secret Service call makes D-Bus start a fresh one
with no unlocked login keyring, and every later test that stores a key fails with "Prompt
dismissed": one dead process would read as dozens of broken features. Before each test the
guard checks that the service's owner is still a daemon over the private keyring folder; if
not, it starts one again over the same folder (the stored keys come back), with a warning that
names the test run just before, so the death is reported where it happened, once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import time
from pathlib import Path

SERVICE = "org.freedesktop.secrets"


class KeyringGuard:
    def __init__(self, folder: str, password: str) -> None:
        self.folder = folder
        self.password = password
        self._bus = None

    def _owner_pid(self) -> int | None:
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection
        from jeepney.wrappers import DBusErrorResponse, unwrap_msg

        if self._bus is None:
            self._bus = open_dbus_connection(bus="SESSION")
        try:
            reply = self._bus.send_and_get_reply(
                message_bus.GetConnectionUnixProcessID(SERVICE), timeout=10
            )
            return int(unwrap_msg(reply)[0])
        except DBusErrorResponse:  # no owner (never activates the service)
            return None

    def healthy(self) -> bool:
        """The service's owner serves our folder (a daemon D-Bus activated would not)."""
        pid = self._owner_pid()
        if pid is None:
            return False
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return False
        return f"XDG_DATA_HOME={self.folder}".encode() in environ

    def ensure(self) -> bool:
        """True if the daemon had to be started again."""
        if self.healthy():
            return False
        with open(Path(self.folder) / "restart.lock", "w") as lock:  # one worker restarts it
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.healthy():
                return False
            subprocess.run(
                ["setsid", "gnome-keyring-daemon", "--replace", "--unlock", "--components=secrets"],
                input=self.password,
                text=True,
                stdout=subprocess.DEVNULL,  # the daemon outlives this call: no pipe to wait on
                stderr=subprocess.DEVNULL,
                env={**os.environ, "XDG_DATA_HOME": self.folder},
                timeout=30,
                check=True,
            )
            # ``--replace`` takes the name over from a daemon D-Bus may have started meanwhile.
            deadline = time.monotonic() + 20
            while not self.healthy():
                if time.monotonic() > deadline:
                    raise RuntimeError("the private test keyring did not come back within 20 s")
                time.sleep(0.05)
        return True

    def close(self) -> None:
        if self._bus is not None:
            with contextlib.suppress(Exception):
                self._bus.close()
            self._bus = None


ACTIVE: KeyringGuard | None = None  # this test process's guard (set by tests/conftest.py)
