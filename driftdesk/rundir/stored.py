"""What ``driftdesk.rundir.store`` and the clients it reads and writes with
(``driftdesk.rundir.s3_client``) both name: an object as listed, and their errors. Its own
module so that a client never imports the layout it serves."""

from __future__ import annotations

from dataclasses import dataclass


class StoreError(Exception):
    """Object storage could not be used as asked (one line, never a credential)."""


class MissingExtra(StoreError):
    """The URL's store needs a package this install lacks (the line says which)."""


class Changed(Exception):
    """An object listed was gone or of another size when read: list again."""


@dataclass(frozen=True)
class StoredObject:
    path: str  # as the filesystem names it (no protocol)
    size: int
    etag: str  # the store's ETag (or generation / version id): what caches key on
