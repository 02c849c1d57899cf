"""An exclusive lock around a read-modify-write, so two driftdesk processes never lose a change.

``locked(name)`` takes an ``flock`` on ``<data dir>/locks/<name>.lock`` (waiting for the holder)
and is re-entrant within a process, so a command that holds a file's lock can call a core that
takes it again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
from collections.abc import Iterator

from driftdesk import paths

_held: dict[str, tuple[int, int]] = {}  # lock name -> (fd, depth)
_guard = threading.RLock()


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[-120:]
    with _guard:
        if slug in _held:
            fd, depth = _held[slug]
            _held[slug] = (fd, depth + 1)
        else:
            folder = paths.data_dir() / "locks"
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder / f"{slug}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            _held[slug] = (fd, 1)
        try:
            yield
        finally:
            fd, depth = _held[slug]
            if depth == 1:
                del _held[slug]
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            else:
                _held[slug] = (fd, depth - 1)
