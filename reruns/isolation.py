"""``--isolate``: run a harness (or a preset's client) under bubblewrap, away from the keyring.

Without it, a harness is an ordinary process of the same user: it gets no key and no bus
address from driftdesk, but it can look for them (``/proc/<driftdesk>/environ``,
``$XDG_RUNTIME_DIR/bus``, the keyring files) and ask the Secret Service itself. Under
``isolate_argv`` it runs in new PID, IPC and UTS namespaces with

- the file system read-only, and hidden behind empty tmpfs: the user's home, ``/tmp``,
  ``/run`` (session and system buses, ``$XDG_RUNTIME_DIR``), ``/var/tmp``, and the keyring
  folder wherever ``$XDG_DATA_HOME`` puts it;
- its own ``/proc`` (no other process's environment or command line);
- read-write: the attempt's folder only (its working directory); read-only: the paths the
  caller names (the suite's folder, the Python driftdesk runs on).

The task's check and the workspace diff, which read what the harness left, run under it too,
with the attempt's workspace copy as their one writable folder (``reruns/workspace.py``).

What does not hold: the network namespace is shared, because the metering proxy listens on the
host's loopback (``--unshare-net`` would cut the harness off from it). So the harness can reach
any network address the user can, and an abstract-socket D-Bus (``unix:abstract=``) would stay
reachable: ``check_isolation`` refuses to isolate when the session bus is on one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

INSTALL_HINT = (
    "--isolate needs bubblewrap (bwrap): install it (Debian/Ubuntu: apt-get install "
    "bubblewrap; Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap)"
)


class IsolationUnavailable(RuntimeError):
    """``--isolate`` cannot work on this machine (no bwrap, no namespaces, an abstract bus)."""


def bwrap_path() -> str:
    found = shutil.which("bwrap")
    if not found:
        raise IsolationUnavailable(INSTALL_HINT)
    return found


def check_isolation() -> None:
    """Raise ``IsolationUnavailable`` (with what to do) unless ``isolate_argv`` will work."""
    bwrap = bwrap_path()
    probe = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        raise IsolationUnavailable(
            "--isolate: bubblewrap cannot create a sandbox here "
            f"({probe.stderr.strip() or f'exit {probe.returncode}'}); unprivileged user "
            "namespaces may be disabled (sysctl kernel.unprivileged_userns_clone)"
        )
    bus = os.environ.get("DBUS_SESSION_BUS_ADDRESS", "")
    if "abstract=" in bus:
        raise IsolationUnavailable(
            "--isolate cannot hide this session bus: it listens on an abstract socket "
            f"({bus.split(',')[0]}), reachable from any process sharing the network namespace"
        )


def _hidden_dirs() -> list[Path]:
    home = Path(os.path.expanduser("~"))
    hidden = [Path("/tmp"), Path("/var/tmp"), Path("/run"), home]
    for variable, tail in (("XDG_RUNTIME_DIR", ""), ("XDG_DATA_HOME", "keyrings")):
        value = os.environ.get(variable)
        if value:
            hidden.append(Path(value) / tail if tail else Path(value))
    hidden.append(home / ".local" / "share" / "keyrings")
    return [p for p in hidden if p != Path("/") and p.is_dir()]


def _unsafe_to_show(path: Path, hidden: list[Path]) -> bool:
    """A path whose binding would show a hidden folder again: one of them or above one."""
    return any(path == h or h.is_relative_to(path) for h in hidden)


def isolate_argv(
    argv: list[str], attempt_dir: Path, proxy_url: str, *, readable: Iterable[Path] = ()
) -> list[str]:
    """``argv`` wrapped in bubblewrap (see the module's docstring for what holds).

    ``attempt_dir`` is the one folder the harness may write (and its working directory);
    ``readable`` are folders it may read (those that would reveal a hidden folder are
    skipped). ``proxy_url`` is where the harness's provider calls go: on the host's loopback,
    which is why the network namespace is shared."""
    del proxy_url  # reachable because the network is shared (see the docstring)
    hidden = _hidden_dirs()
    args = [
        bwrap_path(),
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    for folder in sorted(set(hidden), key=lambda p: len(p.parts)):
        args += ["--tmpfs", str(folder)]
    python = {Path(sys.prefix), Path(sys.base_prefix)}
    for folder in sorted({Path(p).absolute() for p in [*readable, *python]}, key=str):
        if folder.exists() and not _unsafe_to_show(folder, hidden):
            args += ["--ro-bind", str(folder), str(folder)]
    attempt_dir = Path(attempt_dir).absolute()
    args += ["--bind", str(attempt_dir), str(attempt_dir), "--chdir", str(attempt_dir), "--"]
    return args + list(argv)
