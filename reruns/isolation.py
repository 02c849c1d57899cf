"""``--isolate``: run a harness (or a preset's client) under bubblewrap, away from the keyring.

Without it, a harness is an ordinary process of the same user: it gets no key and no bus
address from driftdesk, but it can look for them (``/proc/<driftdesk>/environ``,
``$XDG_RUNTIME_DIR/bus``, the keyring files) and ask the Secret Service itself. Under
``isolate_argv`` it runs in new PID, IPC and UTS namespaces with

- the file system read-only, and hidden behind empty tmpfs: the user's home, ``/tmp``,
  ``/run`` (session and system buses, ``$XDG_RUNTIME_DIR``), ``/var/tmp``, and the keyring
  folder wherever ``$XDG_DATA_HOME`` puts it;
- its own ``/proc`` (no other process's environment or command line);
- wherever they live (``--out /srv/...``, a CI checkout under ``/builds``), behind empty
  tmpfs too (scratch space whose writes are discarded): the run dir (its manifest,
  ``attempts.jsonl``, ``calls.jsonl``, recordings, every task's folder), the configured runs
  folder (``$DRIFTDESK_RUNS_DIR`` or ``./runs``), driftdesk's config, data and cache folders,
  and the folder the run dir is in: whole when it holds nothing but runs, else each run dir
  in it (and in its sub-folders of runs), so ``--out .`` in a project leaves the project's
  own files readable; a folder of runs shown again because the suite is in it keeps each of
  its runs hidden;
- read-write: the attempt's own files only (its workspace copy, its try's result file, a
  client's config dir and output); read-only: its try's prompt file and the paths the caller
  names (the suite's folder, a client's installation, the Python driftdesk runs on), unless
  they would show a hidden folder again or lie in a run dir.

A result file is made empty before the try (a file can only be bound once it exists), so a
harness writes it in place, not by renaming another file onto it; an empty one counts as none
(``drop_unwritten``).

The task's check and the workspace diff, which read what the harness left, run under it too,
with the attempt's workspace copy as their one writable folder (``reruns/workspace.py``).

What does not hold: the network namespace is shared, because the metering proxy listens on the
host's loopback (``--unshare-net`` would cut the harness off from it). So the harness can reach
any network address the user can, and an abstract-socket D-Bus (``unix:abstract=``) would stay
reachable: ``check_isolation`` refuses to isolate when the session bus is on one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from driftdesk.rundir import ATTEMPTS_DIR, ATTEMPTS_FILE, MANIFEST_FILE

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


def _is_run_dir(folder: Path | str) -> bool:
    """A run dir (a harness sees none but its own attempt's files): an attempts file, or a
    manifest with the run's lock or attempts folder beside it (a bare ``manifest.json`` or
    ``.lock`` is common elsewhere: a web app's, pytest's). Plain ``os.path`` calls: a folder
    of 10,000 runs is scanned for every try."""
    where = os.fspath(folder)
    if os.path.isfile(os.path.join(where, ATTEMPTS_FILE)):
        return True
    return os.path.isfile(os.path.join(where, MANIFEST_FILE)) and (
        os.path.lexists(os.path.join(where, ".lock"))
        or os.path.isdir(os.path.join(where, ATTEMPTS_DIR))
    )


def _in_a_run(path: Path) -> bool:
    """Whether ``path`` is a run dir or inside one."""
    return any(_is_run_dir(folder) for folder in (path, *path.parents))


def _run_dir_of(conceal: Path | None) -> Path | None:
    """The run dir a concealed task folder (``<run dir>/attempts/<task>``) belongs to."""
    if conceal is None:
        return None
    for folder in (conceal, *conceal.parents):
        if folder.name == ATTEMPTS_DIR and folder.parent != folder:
            return folder.parent
    return None


def runs_folders(run_dir: Path | None) -> tuple[list[Path], list[Path]]:
    """Where runs and what is derived from them live, hidden from every harness wherever that
    is: ``(whole, beside)``. Hidden whole: the run dir, the configured runs folder
    (``$DRIFTDESK_RUNS_DIR`` or ``./runs``) and driftdesk's config, data and cache folders
    (report caches, write history). ``beside``: the folder the run dir is in (earlier runs
    beside it), hidden whole when it holds nothing but runs, else run by run (``--out .`` in
    a project: the project's own files stay)."""
    from driftdesk import paths

    def resolved(found: list[Path]) -> list[Path]:
        folders: list[Path] = []
        for folder in found:
            with contextlib.suppress(OSError):
                folder = folder.resolve()
                if folder.is_dir() and folder not in folders:
                    folders.append(folder)
        return folders

    whole: list[Path] = [run_dir] if run_dir is not None else []
    for where in (paths.runs_dir, paths.config_dir, paths.data_dir, paths.cache_dir):
        with contextlib.suppress(OSError, ValueError):
            whole.append(where())
    return resolved(whole), resolved([run_dir.parent] if run_dir is not None else [])


def _scan_runs(folder: Path) -> tuple[list[str], list[os.DirEntry[str]]]:
    """What ``folder`` holds: its runs (run dirs, and sub-folders holding nothing but runs,
    such as the demo's history) and everything else (dot files aside)."""
    runs: list[str] = []  # paths as strings: a Path each costs more than the scan
    others: list[os.DirEntry[str]] = []
    try:
        with os.scandir(folder) as entries:
            children = [e for e in entries if not e.name.startswith(".")]
    except OSError:
        return [], []
    for child in children:
        try:
            is_folder = child.is_dir(follow_symlinks=False)
        except OSError:
            is_folder = False
        if is_folder and (_is_run_dir(child.path) or _holds_only_runs(child.path)):
            runs.append(child.path)
        else:
            others.append(child)
    return runs, others


def _holds_only_runs(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            children = [e for e in entries if not e.name.startswith(".")]
    except OSError:
        return False
    return bool(children) and all(
        e.is_dir(follow_symlinks=False) and _is_run_dir(e.path) for e in children
    )


def _show_entry(
    entry: os.DirEntry[str], depth: int, mounts: list[tuple[int, int, str, list[str]]]
) -> None:
    """One entry of a folder hidden whole, shown again read-only (a link as the same link)."""
    if entry.is_symlink():
        mounts.append((depth, 1, entry.path, ["--symlink", os.readlink(entry.path), entry.path]))
    elif entry.is_dir() or entry.is_file():
        mounts.append((depth, 1, entry.path, ["--ro-bind", entry.path, entry.path]))


def isolate_argv(
    argv: list[str],
    *,
    writable: Iterable[Path],
    cwd: Path,
    conceal: Path | None = None,
    readable: Iterable[Path] = (),
) -> list[str]:
    """``argv`` wrapped in bubblewrap (see the module's docstring for what holds).

    ``writable``: the folders and files the harness may write (each must exist); ``cwd`` its
    working directory; ``conceal``: the task's folder in a run dir (the other attempts'
    files), inside which only ``writable`` and ``readable`` paths show; the run dir it is in,
    the folder of runs that holds it and every configured runs folder are hidden too, wherever
    they live; ``readable``: paths it may read (those that would reveal a hidden folder, or lie
    in a run dir other than the attempt's own files, are skipped). The provider calls go to
    the metering proxy on the host's loopback, which is why the network namespace is shared."""
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
    concealed = Path(conceal).absolute() if conceal is not None else None
    run_dir = _run_dir_of(concealed.resolve() if concealed is not None else None)
    whole, beside = runs_folders(run_dir)

    def inside(path: Path) -> bool:
        return concealed is not None and path.is_relative_to(concealed)

    python = {Path(sys.prefix), Path(sys.base_prefix)}
    shown = sorted({Path(p).absolute() for p in [*readable, *python]}, key=str)
    # Mounts apply in order, so each goes in by depth: a folder hidden under one shown again
    # stays hidden, and a path shown inside a hidden folder shows. At one path, hide first.
    mounts: list[tuple[int, int, str, list[str]]] = []

    def hide(folder: Path | str) -> None:
        where = os.fspath(folder)
        if where != "/":
            depth = where.count("/") + 1  # as len(Path(where).parts), for absolute paths
            mounts.append((depth, 0, where, ["--tmpfs", where]))

    def show(path: Path) -> None:
        mounts.append((len(path.parts), 1, str(path), ["--ro-bind", str(path), str(path)]))

    for folder in hidden:
        hide(folder)
    shown_resolved = {p.resolve() for p in shown}
    children_shown: set[Path] = set()  # folders hidden whole whose other entries show again
    for folder in dict.fromkeys([*whole, *beside]):  # each once (./runs is often both)
        reshown = folder in shown_resolved  # the suite's folder is this folder of runs
        if folder != Path("/") and folder in whole and not reshown:
            hide(folder)
            continue
        runs, others = _scan_runs(folder)
        if folder != Path("/") and not others:
            hide(folder)
        elif len(runs) <= len(others) or folder == Path("/"):
            for run in runs:  # few runs among other files: each run hidden
                hide(run)
        else:  # many runs (an argv holds only so many mounts): hidden whole, the rest shown
            hide(folder)
            children_shown.add(folder)
            for entry in others:
                with contextlib.suppress(OSError):
                    _show_entry(entry, len(folder.parts) + 1, mounts)
    for path in shown:  # outside the concealed folder: the attempt's own files come last
        if inside(path) or not path.exists() or _unsafe_to_show(path, hidden):
            continue
        if path.resolve() in children_shown:
            continue  # its entries show one by one, its runs not
        if _in_a_run(path.resolve()):
            continue  # nothing of a run shows but the attempt's own files
        show(path)
    for mount in dict.fromkeys(tuple(m[3]) for m in sorted(mounts, key=lambda m: m[:3])):
        args += mount
    if concealed is not None:
        args += ["--tmpfs", str(concealed)]
        args += [
            a for p in shown if inside(p) and p.exists() for a in ("--ro-bind", str(p), str(p))
        ]
    for path in sorted({Path(p).absolute() for p in writable}, key=lambda p: len(p.parts)):
        args += ["--bind", str(path), str(path)]
    return [*args, "--chdir", str(Path(cwd).absolute()), "--", *argv]


def isolated_harness(
    command: str,
    *,
    result_path: Path,
    prompt_path: Path,
    workspace: Path | None,
    readable: Iterable[Path] = (),
) -> list[str]:
    """A command harness's try under bubblewrap: it writes its workspace copy and its result
    file, reads its prompt file; the rest of the task's folder (the other attempts') is hidden.
    The result file is made here, empty (see ``drop_unwritten``)."""
    fd = os.open(
        result_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    os.close(fd)
    folder = result_path.parent
    return isolate_argv(
        ["/bin/sh", "-c", command],
        writable=[result_path, *([workspace] if workspace is not None else [])],
        cwd=workspace or folder,
        conceal=folder,
        readable=[*readable, prompt_path],
    )


def drop_unwritten(path: Path) -> None:
    """A result file an isolated harness left empty was never written: remove it, so the try is
    judged as one without a result file."""
    try:
        if os.stat(path, follow_symlinks=False).st_size == 0:
            os.unlink(path)
    except FileNotFoundError:
        pass
