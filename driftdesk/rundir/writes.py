"""The writes of a run dir: making one under a fresh run id (and taking back what a refused
run made), the manifest's writes (the space a running run holds back for its last one), the
private files an attempt's logs and transcripts go to (never written through a symlink, FIFO or
hard link a harness planted), and cutting a torn last row off a JSONL file.

What a run writes, and when, is the engine's (``reruns``); how it lands on disk is this
module's. The importer of foreign results writes its run dirs through it too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import itertools
import os
import shutil
import stat
from pathlib import Path
from typing import Any, Literal, TextIO

from driftdesk.fileio import atomic_write_json
from driftdesk.rundir.ids import candidate_run_ids, run_id_base
from driftdesk.rundir.layout import MANIFEST_FILE


def create_run_dir(out_dir: Path, profile: str, model: str, now: dt.datetime) -> tuple[str, Path]:
    """Make a new, empty run dir; never reuses an existing one (suffix -2, -3...)."""
    base = run_id_base(profile, model, now)
    out_dir.mkdir(parents=True, exist_ok=True)
    for run_id in itertools.islice(candidate_run_ids(base), 9_999):
        path = out_dir / run_id
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return run_id, path
    raise RuntimeError(f"could not find a free run dir name under {out_dir}")


def missing_folders(path: Path) -> list[Path]:
    """The folders of ``path`` (itself included) that do not exist yet, deepest first: what
    ``create_run_dir`` is about to make for a run that may yet be refused."""
    missing = []
    for folder in (Path(path), *Path(path).parents):
        if folder.exists() or folder.is_symlink():
            break
        missing.append(folder)
    return missing


def discard_unstarted_run_dir(run_dir: Path | None, made: list[Path]) -> None:
    """A run refused before its manifest was written leaves nothing behind: its run dir (only
    our lock and reserve are in it; no harness has run) and the folders ``made`` for it that
    are still empty. A run dir with a manifest is a run, and is kept."""
    if run_dir is not None:
        if (Path(run_dir) / MANIFEST_FILE).exists():
            return
        shutil.rmtree(run_dir, ignore_errors=True)
    for folder in made:
        try:
            folder.rmdir()  # only while empty: another run may have started there meanwhile
        except OSError:
            break


# Never through what a harness may have planted where our file goes: a symlink (O_NOFOLLOW),
# a FIFO that would block the open (O_NONBLOCK: no reader is ENXIO), a hard link (checked).
_PRIVATE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_PLANTED_ERRNOS = (errno.ELOOP, errno.ENXIO, errno.EISDIR)


def _open_own_file(path: Path, append: bool) -> int:
    """An fd on ``path`` that is our own regular file (made 0600): anything else found there
    (a symlink, FIFO, socket, hard link, folder) is removed, never written through."""
    flags = _PRIVATE_FLAGS | os.O_CREAT | (os.O_APPEND if append else 0)
    for _ in range(8):  # a harness still running may plant again between unlink and open
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno not in _PLANTED_ERRNOS:
                raise
            _remove_planted(path)
            flags |= os.O_EXCL  # create it ourselves: O_EXCL never follows a symlink either
            continue
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            os.set_blocking(fd, True)
            return fd
        os.close(fd)  # a hard link to someone else's file, or no regular file: not ours
        _remove_planted(path)
        flags |= os.O_EXCL
    raise OSError(errno.EEXIST, f"{path}: something keeps being planted here; not written")


def _remove_planted(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def open_private(path: Path, mode: Literal["a", "w"] = "a") -> TextIO:
    """Open an attempt's log or transcript for writing ("a" or "w"), readable by its owner
    only (0600, like the JSONL files): harness output may quote things we did not write. The
    attempt's folder is the harness's to write: a symlink, hard link or FIFO it put at
    ``path`` is replaced, never written through (``_open_own_file``)."""
    fd = _open_own_file(Path(path), append=mode == "a")
    try:
        os.fchmod(fd, 0o600)  # a file left by an older version keeps no wider mode
        if mode == "w":
            os.ftruncate(fd, 0)  # only now: truncating at open would hit a hard link's target
        return os.fdopen(fd, mode, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def write_manifest(run_dir: Path, manifest: dict[str, Any], mode: int | None = None) -> None:
    """``manifest`` as ``run_dir``'s manifest, replaced whole (a reader never sees half of it)."""
    atomic_write_json(run_dir / MANIFEST_FILE, manifest, mode)


# Space a running run holds back for its last manifest: a disk filled by the run (its rows,
# logs, the harness's files) would otherwise leave the manifest saying "running", no reason.
MANIFEST_RESERVE = ".manifest-reserve"
MANIFEST_RESERVE_BYTES = 64 * 1024


def reserve_manifest_space(run_dir: Path) -> None:
    """Hold ``MANIFEST_RESERVE_BYTES`` in the run dir (real blocks, not a sparse file) until
    ``write_final_manifest``. Raises ``OSError`` when the disk cannot spare them: a run that
    could not record how it ended is not started."""
    path = Path(run_dir) / MANIFEST_RESERVE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            data = b"\0" * MANIFEST_RESERVE_BYTES
            if os.write(fd, data) != len(data):  # a short write: the disk is full
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        release_manifest_space(run_dir)
        raise


def release_manifest_space(run_dir: Path) -> bool:
    """Free the reserve; whether there was one."""
    try:
        (Path(run_dir) / MANIFEST_RESERVE).unlink()
    except FileNotFoundError:
        return False
    except OSError:
        return False
    return True


def write_final_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """The run's last manifest; when the disk is full, written into the space reserved for it
    (``reserve_manifest_space``). The reserve is released either way."""
    try:
        write_manifest(run_dir, manifest)
    except OSError:
        if not release_manifest_space(run_dir):
            raise
        write_manifest(run_dir, manifest)
    else:
        release_manifest_space(run_dir)


def drop_torn_tail(path: Path) -> int:
    """Cut a torn last line (no trailing newline: a writer was killed mid-row) off ``path``.

    Returns the number of bytes dropped (0 if the file ends cleanly or does not exist).
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


def free_run_dir(out_dir: Path, base: str) -> Path:
    """The first of ``base``, ``base-2``, ``base-3``... under ``out_dir`` that does not exist
    yet (made by the caller: the importer renames a staged folder there)."""
    return next(out_dir / name for name in candidate_run_ids(base) if not (out_dir / name).exists())
