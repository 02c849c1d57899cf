"""Keeps the private test keyring (``tests/with-keyring.sh``) alive for the whole test run.

If its gnome-keyring-daemon dies, the next Secret Service call makes D-Bus start a fresh one
with no unlocked login keyring, and every later test that stores a key fails with "Prompt
dismissed": one dead process would read as dozens of broken features. Before each test the
guard checks that the service's owner is still a daemon over the private keyring folder; if
not, it starts one again over the same folder (the stored keys come back), with a warning that
names the test run just before, so the death is reported where it happened, once.

Every daemon we start has its control socket in the private folder (``--control-directory``).
Without it, a daemon uses ``$XDG_RUNTIME_DIR/keyring`` when that is set, a path shared by every
gnome-keyring of the user: starting ours would take over the socket of another one (a desktop's
own keyring, or another test session's), and ``--replace`` would tell that one to quit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

SERVICE = "org.freedesktop.secrets"
SECRETS_PATH = "/org/freedesktop/secrets"
STARTS = 3  # a daemon that dies while starting is started again, this many times in all


class KeyringGuard:
    def __init__(self, folder: str, password: str) -> None:
        self.folder = folder
        self.password = password
        self._bus = None

    @property
    def control_directory(self) -> str:
        return str(Path(self.folder) / "control")

    @property
    def log_path(self) -> Path:
        return Path(self.folder) / "daemon.log"

    def _call(self, msg):  # type: ignore[no-untyped-def]
        from jeepney.io.blocking import open_dbus_connection

        if self._bus is None:
            self._bus = open_dbus_connection(bus="SESSION")
        return self._bus.send_and_get_reply(msg, timeout=10)

    def _owner_pid(self) -> int | None:
        from jeepney.bus_messages import message_bus
        from jeepney.wrappers import DBusErrorResponse, unwrap_msg

        try:
            return int(unwrap_msg(self._call(message_bus.GetConnectionUnixProcessID(SERVICE)))[0])
        except DBusErrorResponse:  # no owner (never activates the service)
            return None

    def _serves_our_folder(self, pid: int) -> bool:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # gone; a zombie reads as empty
            return False
        return f"XDG_DATA_HOME={self.folder}".encode() in environ

    def healthy(self) -> bool:
        """The service's owner serves our folder (a daemon D-Bus activated would not)."""
        pid = self._owner_pid()
        return pid is not None and self._serves_our_folder(pid)

    def _answers_unlocked(self) -> bool:
        """The owner answers a real call, and the default collection is unlocked: what every
        store needs. A daemon that only holds the name would pass ``healthy`` and fail here."""
        from jeepney import DBusAddress, Properties, new_method_call
        from jeepney.wrappers import DBusErrorResponse, unwrap_msg

        service = DBusAddress(SECRETS_PATH, bus_name=SERVICE,
                              interface="org.freedesktop.Secret.Service")  # fmt: skip
        try:
            (path,) = unwrap_msg(
                self._call(new_method_call(service, "ReadAlias", "s", ("default",)))
            )
            if path == "/":
                return False
            collection = DBusAddress(path, bus_name=SERVICE,
                                     interface="org.freedesktop.Secret.Collection")  # fmt: skip
            ((_signature, locked),) = unwrap_msg(self._call(Properties(collection).get("Locked")))
        except (DBusErrorResponse, TimeoutError, OSError):
            return False
        return locked is False

    def _stop_foreign_owner(self) -> None:
        # A daemon D-Bus started on demand holds the name without our folder; ours could not
        # take the name from it. It lives in this test session's private bus, so it is ours
        # to stop.
        pid = self._owner_pid()
        if pid is not None and not self._serves_our_folder(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while self._owner_pid() == pid and time.monotonic() < deadline:
                time.sleep(0.05)

    def _start(self) -> None:
        with self.log_path.open("a") as log:
            log.write(f"--- start at {time.strftime('%H:%M:%S')}\n")
            log.flush()
            subprocess.run(
                ["setsid", "gnome-keyring-daemon", "--replace", "--unlock", "--components=secrets",
                 f"--control-directory={self.control_directory}"],
                input=self.password,
                text=True,
                stdout=subprocess.DEVNULL,  # the daemon outlives this call: no pipe to wait on
                stderr=log,
                env={**os.environ, "XDG_DATA_HOME": self.folder},
                timeout=30,
                check=True,
            )  # fmt: skip

    def _wait_ready(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pid = self._owner_pid()
            if pid is not None and self._serves_our_folder(pid) and self._answers_unlocked():
                time.sleep(0.2)  # still the same daemon a moment later: it did not die starting
                if self._owner_pid() == pid and self._answers_unlocked():
                    return True
            time.sleep(0.05)
        return False

    def ensure(self) -> bool:
        """True if the daemon had to be started again."""
        if self.healthy():
            return False
        with open(Path(self.folder) / "restart.lock", "w") as lock:  # one worker restarts it
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.healthy():
                return False
            for _ in range(STARTS):
                self._stop_foreign_owner()
                self._start()
                if self._wait_ready(20):
                    return True
            raise RuntimeError(
                f"the private test keyring did not come back after {STARTS} starts; "
                f"daemon log:\n{self.diagnostics()}"
            )

    def diagnostics(self) -> str:
        """What a failure report needs: the daemons' log and every keyring process."""
        log = self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""
        ps = subprocess.run(["ps", "-eo", "pid,ppid,pgid,sid,stat,lstart,args"],
                            capture_output=True, text=True, check=False).stdout  # fmt: skip
        keyring_lines = [line for line in ps.splitlines()[1:] if "keyring" in line]
        owner = self._owner_pid()
        return "\n".join(
            [log, f"owner of {SERVICE}: {owner}", *ps.splitlines()[:1], *keyring_lines]
        )

    def close(self) -> None:
        if self._bus is not None:
            with contextlib.suppress(Exception):
                self._bus.close()
            self._bus = None


ACTIVE: KeyringGuard | None = None  # this test process's guard (set by tests/conftest.py)
