"""The guard every harness runs under: ``python -I -S guard.py PARENT_PID -- ARGV...``.

A stand-alone script (standard library only, started with ``-I -S`` so it starts fast and
reads nothing of the user's Python set-up). It

- dies with driftdesk: ``PR_SET_PDEATHSIG`` delivers SIGTERM to the guard when the process
  that started it dies, even by ``kill -9`` (it checks the parent is still the one it was
  given, so a parent that died before the call is caught too);
- is a child subreaper (``PR_SET_CHILD_SUBREAPER``): whatever the harness starts, even a
  daemon that ``setsid``s and double-forks, stays below the guard instead of moving to init;
- ends the attempt when the harness exits: every process left below the guard is killed, so
  a background child holding stdout open cannot keep the attempt alive;
- on SIGTERM/SIGINT/SIGHUP (driftdesk's timeout or cancel, or driftdesk's death) kills the
  whole tree and exits ``128 + signal``.

It exits with the harness's code (``128 + N`` when the harness died of signal N) and writes
nothing to stdout (the harness's output is the attempt's).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


def _descendants(root: int) -> list[int]:
    """Every live process below ``root`` (read from /proc; orphans re-parent to us)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 2 or fields[0] == b"Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_tree() -> None:
    """SIGKILL everything below us until nothing is left (a forking process is caught on a
    later pass), then reap it."""
    me = os.getpid()
    for _ in range(200):
        left = _descendants(me)
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _reap()
        time.sleep(0.005)
    _reap()


def _on_signal(signum: int, _frame: object) -> None:
    raise _Stop(signum)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: guard.py PARENT_PID -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    parent = int(argv[0])
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # driftdesk died before the line above took effect
            return 128 + signal.SIGTERM
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        # The harness inherits our process group (driftdesk made us its leader) and our
        # stdin/stdout/stderr; default signal dispositions are restored by exec.
        # Python ignores SIGPIPE and SIGXFSZ; the harness gets the defaults back.
        harness = os.posix_spawnp(
            argv[2], argv[2:], os.environ, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ)
        )
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == harness:
                break
        code = os.waitstatus_to_exitcode(status)
        return code if code >= 0 else 128 - code
    except _Stop as stop:
        return 128 + stop.signum
    except OSError as exc:
        print(f"[driftdesk guard] cannot start {argv[2]!r}: {exc}", file=sys.stderr)
        return 127
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        _kill_tree()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
