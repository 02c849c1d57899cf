"""A run dir in object storage (``s3://bucket/prefix``, or any fsspec URL): THE owner of its
layout there — the URLs, the immutable parts its growing files are published as, the lock
object, the one listing and the ETags a reader keys on.

A run at ``<url>/<run_id>/`` holds its files under the same names as on disk, except the two
that grow: an object cannot be appended to, so ``attempts.jsonl`` and ``calls.jsonl`` are
published as immutable parts, ``attempts.jsonl.parts/<offset>.jsonl``, each a run of whole
lines starting at that byte offset of the local file. Read in offset order they are the file
(``join_parts``); a part is never rewritten (a republished range has the same name and bytes).
Every other file of the run (logs, transcripts, recordings, workspaces: thousands of small
files) is published in bundles, ``files.parts/<seq>.bin`` (the files' bytes one after another)
with ``files.parts/<seq>.json`` (each file's relative path, offset and size; written after its
bundle, so a bundle without it is not yet one): a handful of objects a run, not one a file,
and a reader fetches one file by a ranged read. A later bundle's copy of a path wins.
``publish.lock`` names the machine that publishes the run: created only if absent (a
conditional write), it keeps two machines from resuming one run. A run published whole (its
publisher's end, or ``push``) also gets ``sealed/<digest>.<ends>.bin``: its reading set (manifest
and the two growing files as the parts make them) in one compressed object, so a first read
fetches one object a run, not three (the store's cost is per request), and a 13th of the
bytes (the cost over a real network). Its name is the digest of the manifest's ETag and the
parts' ends it was made with, then those ends (``sealed_path``): a run resumed or grown since no
longer matches its listing, and is read from its parts. Once sealed, a run's parts are dropped
(``drop_parts``): a finished run is its manifest, its seal and its bundles, a few objects a
listing enumerates whatever its length (a publisher puts a part every tick); a resume
publishes its rows again from the start, as parts, until it is sealed again.

Credentials are never ours: fsspec's filesystem (s3fs: botocore's chain — environment,
``~/.aws``, profiles, instance roles) finds them; a URL carrying one is refused, so none is in
a path we print or a manifest we write. fsspec is the optional ``remote`` extra
(``pip install 'driftdesk[remote]'``: fsspec + s3fs); it is imported only when a URL is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from driftdesk.rundir.layout import ATTEMPTS_FILE, CALLS_FILE, MANIFEST_FILE

# named by callers as store.StoreError, store.StoredObject…: the layout's own words
from driftdesk.rundir.stored import Changed, MissingExtra, StoredObject, StoreError

EXTRA = "remote"
INSTALL_EXTRA = f"pip install 'driftdesk[{EXTRA}]'"
PARTS_SUFFIX = ".parts"  # attempts.jsonl.parts/<offset>.jsonl
BUNDLES = "files.parts"  # files.parts/<seq>.bin + <seq>.json
BUNDLE_DIGITS = 8
PART_DIGITS = 16
LOCK_OBJECT = "publish.lock"
SEALED = "sealed"  # sealed/<digest>.bin: a run's reading set in one object
GROWING_FILES = (ATTEMPTS_FILE, CALLS_FILE)
SEAL_ENCODING = "zlib"  # a sealed object's body: one zlib stream
SEAL_LEVEL = 1
SEAL_CHUNK = 4 * 2**20

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# What each store's fsspec implementation is called, for the line a missing one gets.
_IMPLEMENTATIONS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs"}
_IMPLEMENTATIONS |= {"abfs": "adlfs", "abfss": "adlfs"}


def is_url(text: object) -> bool:
    """Whether a command-line value is a URL (``scheme://…``), never a folder name."""
    return isinstance(text, str) and _SCHEME.match(text) is not None


def normal_url(url: str) -> str:
    """``url`` without a trailing slash; a URL holding a credential (``user:secret@``) or a
    query is refused, since we print and record the URLs we are given."""
    parts = urlsplit(url)
    if parts.username or parts.password or "@" in parts.netloc:
        raise StoreError(
            "a storage URL must not hold credentials (user:secret@): they come from the "
            "store's own chain (environment, ~/.aws, profiles, instance roles)"
        )
    if parts.query or parts.fragment:
        raise StoreError(f"a storage URL takes no query or fragment: {url.split('?')[0]}…")
    if not parts.netloc:
        raise StoreError(f"{url}: no bucket in the URL")
    return url.rstrip("/")


def join(url: str, *names: str) -> str:
    return "/".join([url.rstrip("/"), *names])


def safe_name_of_url(url: str) -> str:
    """A folder name that tells which URL it stands for (``s3-team-nightly``)."""
    from driftdesk.rundir.ids import safe_name

    return safe_name(url.replace("://", "-"), fallback="store")


def protocol_of(url: str) -> str:
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else ""


def filesystem(url: str) -> Any:
    """The fsspec filesystem of ``url`` (a ``StoreError`` saying what to install if the
    extra or the store's implementation is missing). Its credentials come from its chain."""
    protocol = protocol_of(url)
    try:
        import fsspec
    except ImportError:
        raise MissingExtra(
            f"{protocol}:// URLs need driftdesk's object-storage extra: {INSTALL_EXTRA}"
        ) from None
    try:
        return fsspec.filesystem(protocol)
    except ImportError:
        needed = _IMPLEMENTATIONS.get(protocol)
        what = f"pip install {needed}" if needed else f"the fsspec implementation of {protocol}"
        extra = f" ({INSTALL_EXTRA} brings s3://)" if protocol not in ("s3", "s3a") else ""
        raise MissingExtra(f"{protocol}:// URLs need {what}{extra}") from None
    except ValueError:
        raise StoreError(f"{protocol}:// is no storage fsspec knows") from None


def strip_protocol(fs: Any, url: str) -> str:
    return str(fs._strip_protocol(url)).rstrip("/")


def client(url: str) -> Any:
    """What driftdesk reads and writes ``url`` with: for ``s3://``, a ``BotocoreS3``
    (botocore's client for the listing, whole objects, writes and the lock; s3fs made only for
    a ranged read), else ``filesystem``. Both raise fsspec's errors."""
    from driftdesk.rundir import s3_client

    if protocol_of(url) in ("s3", "s3a") and s3_client.plain_s3():
        return s3_client.BotocoreS3(url, fallback=filesystem)
    return filesystem(url)


def part_name(offset: int) -> str:
    return f"{offset:0{PART_DIGITS}d}.jsonl"


def part_offset(name: str) -> int | None:
    stem = name.removesuffix(".jsonl")
    return int(stem) if name.endswith(".jsonl") and stem.isdigit() else None


@dataclass
class StoredRun:
    """One run in a bucket, as one listing saw it."""

    run_id: str
    path: str
    manifest: StoredObject | None = None
    parts: dict[str, list[tuple[int, StoredObject]]] = field(default_factory=dict)
    lock: StoredObject | None = None
    # seq -> (its bytes, its index) of each bundle whose index is there
    bundles: dict[int, tuple[StoredObject, StoredObject]] = field(default_factory=dict)
    other: list[StoredObject] = field(default_factory=list)  # any other object, copied as is
    sealed: dict[str, StoredObject] = field(default_factory=dict)  # by path

    def next_bundle(self) -> int:
        return max(self.bundles, default=-1) + 1

    def key(self) -> list[Any]:
        """What a reader's copy of this run keys on: the ETags of its reading set (its parts,
        or, once they are dropped, its seal)."""
        sealed = None if self.parts else self.sealed_reading_set()
        return [
            None if self.manifest is None else self.manifest.etag,
            {name: [[o, p.etag] for o, p in parts] for name, parts in sorted(self.parts.items())},
            None if sealed is None else [sealed.path, sealed.etag],
        ]

    def published_end(self, name: str) -> int:
        """The byte offset of ``name`` that its published parts reach."""
        return max((o + p.size for o, p in self.parts.get(name, [])), default=0)

    def sealed_reading_set(self) -> StoredObject | None:
        """The sealed object holding this run's reading set as listed (None: none matches
        the manifest and parts listed). A run whose parts were dropped once it was sealed is
        read from the seal made of its manifest, the ends it holds in its name."""
        if self.manifest is None or not self.sealed:
            return None
        if not self.parts:
            for path in self.sealed:
                ends = ends_of_seal(path)
                if ends is not None and sealed_path(self.path, self.manifest.etag, ends) == path:
                    return self.sealed[path]
            return None
        ends = {}
        for name in GROWING_FILES:
            chosen = parts_to_read(self.parts.get(name, []))
            ends[name] = chosen[-1][0] + chosen[-1][1].size if chosen else 0
        return self.sealed.get(sealed_path(self.path, self.manifest.etag, ends))


def sealed_path(run_path: str, manifest_etag: str, ends: dict[str, int]) -> str:
    """Where the reading set made of the manifest with ``manifest_etag`` and the growing files
    up to ``ends`` is sealed (the encoding is in the digest: a reader that knows another
    finds no seal, and reads the parts)."""
    sizes = [int(ends.get(n, 0)) for n in GROWING_FILES]
    made_of = json.dumps([SEAL_ENCODING, manifest_etag, sizes])
    digest = hashlib.sha256(made_of.encode()).hexdigest()[:32]
    return f"{run_path}/{SEALED}/{'.'.join([digest, *map(str, sizes)])}.bin"


def ends_of_seal(path: str) -> dict[str, int] | None:
    """The growing files' ends a sealed object's name holds (None: no seal's name)."""
    fields = path.rsplit("/", 1)[-1].removesuffix(".bin").split(".")
    if len(fields) != 1 + len(GROWING_FILES) or not all(f.isdigit() for f in fields[1:]):
        return None
    return dict(zip(GROWING_FILES, map(int, fields[1:]), strict=True))


def seal(manifest: bytes, files: dict[str, tuple[Path, int]]) -> bytes:
    """A reading set as one object: a JSON line of the sizes and the encoding, then the
    manifest and each growing file's first ``end`` bytes (``files``: name -> local path, end)
    as one zlib stream. JSONL shrinks ~13× at zlib's fastest level (~400 MB/s), so a first
    read moves that many fewer bytes; the files are read in chunks, never held whole."""
    sizes = {n: files[n][1] if n in files else 0 for n in GROWING_FILES}
    head = {MANIFEST_FILE: len(manifest), **sizes, "encoding": SEAL_ENCODING}
    packer = zlib.compressobj(SEAL_LEVEL)
    out = [json.dumps(head).encode(), b"\n", packer.compress(manifest)]
    for path, end in (files[n] for n in GROWING_FILES if n in files):  # in the head's order
        with open(path, "rb") as fh:
            left = end
            while left > 0:
                chunk = fh.read(min(left, SEAL_CHUNK))
                if not chunk:
                    raise StoreError(f"{path} ends before byte {end}, as published")
                out.append(packer.compress(chunk))
                left -= len(chunk)
    out.append(packer.flush())
    return b"".join(out)


def unseal(stored: StoredObject, data: bytes) -> dict[str, memoryview]:
    """The manifest's and each growing file's bytes in a sealed object (``StoreError`` when
    it is not one: a wrong head, another encoding, a stream not of the sizes it names)."""
    head_end = data.find(b"\n")
    names = [MANIFEST_FILE, *GROWING_FILES]
    try:
        head: Any = json.loads(data[:head_end]) if head_end > 0 else None
        lengths = [int(head[name]) for name in names]
        encoding = head["encoding"]
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"{stored.path}: not a sealed reading set") from None
    if encoding != SEAL_ENCODING or min(lengths) < 0:
        raise StoreError(f"{stored.path}: a sealed reading set of another encoding")
    total = sum(lengths)
    unpacker = zlib.decompressobj()
    try:  # at most one byte more than named: a stream that is longer is refused, not read
        body = unpacker.decompress(memoryview(data)[head_end + 1 :], total + 1)
    except zlib.error:
        raise StoreError(f"{stored.path}: not a sealed reading set") from None
    if len(body) != total or not unpacker.eof or unpacker.unused_data:
        raise StoreError(f"{stored.path}: not a sealed reading set")
    view, found, at = memoryview(body), {}, 0
    for name, length in zip(names, lengths, strict=True):
        found[name] = view[at : at + length]
        at += length
    return found


def etag_of(info: dict[str, Any]) -> str:
    for key in ("ETag", "etag", "generation", "VersionId", "version_id", "md5Hash", "mtime"):
        value = info.get(key)
        if value not in (None, ""):
            return str(value).strip('"')
    return f"size:{info.get('size')}"


def list_runs(fs: Any, root: str) -> dict[str, StoredRun]:
    """Every run under ``root`` (a folder of runs, or one run), by one recursive listing."""
    # Listed afresh, and nothing read after from the listing cache: s3fs reads an object's
    # size from its folder's cached listing (a part newer than it "does not exist"), and
    # invalidating a path keeps its sub-folders' listings.
    from driftdesk.rundir.s3_client import BotocoreS3

    if isinstance(fs, BotocoreS3):
        direct = fs.list_objects(root)
        if direct is not None:
            return runs_of(root, direct)
    fs.invalidate_cache()
    try:
        listed = fs.find(root, detail=True)
    except FileNotFoundError:
        return {}
    except PermissionError as exc:
        raise StoreError(f"the store refused to list {root}: {exc}") from None
    return runs_of(root, listed)


def runs_of(root: str, listed: dict[str, dict[str, Any]]) -> dict[str, StoredRun]:
    runs: dict[str, StoredRun] = {}
    halves: dict[tuple[str, str], dict[str, StoredObject]] = {}
    single = f"{root}/{MANIFEST_FILE}" in listed
    for path, info in listed.items():
        if info.get("type", "file") != "file" or not path.startswith(root + "/"):
            continue
        names = path[len(root) + 1 :].split("/")
        if single:
            run_path, rest = root, names
        elif len(names) >= 2:
            run_path, rest = f"{root}/{names[0]}", names[1:]
        else:
            continue
        run = runs.setdefault(run_path, StoredRun(run_path.rsplit("/", 1)[-1], run_path))
        stored = StoredObject(path, int(info.get("size") or 0), etag_of(info))
        grown = rest[0].removesuffix(PARTS_SUFFIX)
        if rest == [MANIFEST_FILE]:
            run.manifest = stored
        elif rest == [LOCK_OBJECT]:
            run.lock = stored
        elif len(rest) == 2 and rest[0].endswith(PARTS_SUFFIX) and grown in GROWING_FILES:
            offset = part_offset(rest[1])
            if offset is not None:
                run.parts.setdefault(grown, []).append((offset, stored))
        elif len(rest) == 2 and rest[0] == SEALED and rest[1].endswith(".bin"):
            run.sealed[path] = stored
        elif len(rest) == 2 and rest[0] == BUNDLES:
            halves.setdefault((run_path, rest[1].split(".")[0]), {})[rest[1]] = stored
        else:
            run.other.append(stored)
    for (run_path, stem), found in halves.items():
        data, index = found.get(f"{stem}.bin"), found.get(f"{stem}.json")
        if stem.isdigit() and data is not None and index is not None:
            runs[run_path].bundles[int(stem)] = (data, index)
    for run in runs.values():
        for parts in run.parts.values():
            parts.sort(key=lambda item: item[0])
    return {run.run_id: run for run in runs.values() if run.manifest is not None}


def fetch(fs: Any, stored: StoredObject) -> bytes:
    """The bytes of ``stored`` as listed (``Changed`` if it was replaced or deleted since)."""
    try:
        data = bytes(fs.cat_file(stored.path))
    except FileNotFoundError:
        raise Changed(stored.path) from None
    if len(data) != stored.size:
        raise Changed(stored.path)
    return data


def fetch_many(fs: Any, objects: Iterable[StoredObject]) -> dict[str, bytes]:
    """The bytes of each object as listed, fetched concurrently (``Changed`` if one was
    replaced or deleted since the listing)."""
    wanted = list(objects)
    if not wanted:
        return {}
    from driftdesk.rundir.s3_client import BotocoreS3

    if isinstance(fs, BotocoreS3):
        fetched: dict[str, bytes] = {}
        fs.fetch_groups([[o] for o in wanted], lambda _, got: fetched.update(got))
        return fetched
    # cat_ranges reads exactly these paths (concurrently on an async store); ``cat`` would
    # first expand them through the listing cache, where a part newer than it is missing
    got = fs.cat_ranges([o.path for o in wanted], None, None, on_error="return")
    fetched = {}
    for stored, data in zip(wanted, got, strict=True):
        if data is None or isinstance(data, FileNotFoundError):
            raise Changed(stored.path)
        if isinstance(data, PermissionError):
            raise StoreError(f"the store refused to read {stored.path}: {data}")
        if isinstance(data, BaseException):
            raise data
        if len(data) != stored.size:
            raise Changed(stored.path)
        fetched[stored.path] = bytes(data)
    return fetched


def fetch_groups(
    fs: Any,
    groups: Sequence[Sequence[StoredObject]],
    consume: Callable[[int, dict[str, bytes]], None],
) -> None:
    """Fetch each group of objects (one run's) and hand it whole to ``consume(index, bytes by
    path)``. On ``s3://`` the groups are fetched at once and each consumed as soon as it is
    there, in the thread that fetched it, so the consumer's work (unsealing, writing files)
    overlaps the other groups' transfers; elsewhere all are fetched, then consumed in order.
    ``Changed`` if an object was replaced or deleted since the listing."""
    from driftdesk.rundir.s3_client import BotocoreS3

    if isinstance(fs, BotocoreS3):
        fs.fetch_groups(groups, consume)
        return
    fetched = fetch_many(fs, [o for group in groups for o in group])
    for index, group in enumerate(groups):
        consume(index, {o.path: fetched[o.path] for o in group})


def parts_to_read(
    parts: Iterable[tuple[int, StoredObject]], start: int = 0
) -> list[tuple[int, StoredObject]]:
    """The parts that make the file from byte ``start`` on: each where the one before ended
    (a part inside a range already read is a republished range, skipped; a gap ends the file
    there, as a writer killed mid-publish leaves it)."""
    chosen, end = [], start
    for offset, stored in parts:
        if offset + stored.size <= end:
            continue
        if offset > end:
            break
        chosen.append((offset, stored))
        end = offset + stored.size
    return chosen


def join_parts(
    fs: Any,
    parts: Iterable[tuple[int, StoredObject]],
    start: int = 0,
    fetched: dict[str, bytes] | None = None,
) -> bytes:
    """The file the parts make from byte ``start`` on (``parts_to_read``), from ``fetched``
    when given (``fetch_many``), else fetched now."""
    chosen = parts_to_read(parts, start)
    if fetched is None:
        fetched = fetch_many(fs, [stored for _, stored in chosen])
    chunks, end = [], start
    for offset, stored in chosen:
        chunks.append(fetched[stored.path][end - offset :])
        end = offset + stored.size
    return b"".join(chunks)


def drop_parts(fs: Any, run_path: str) -> int:
    """Delete the growing files' parts of the run at ``run_path`` once its seal holds them
    (``sealed_reading_set``): a finished run is then its manifest, its seal and its bundles,
    a few objects every listing of the history enumerates, not one a publisher tick. The
    number of parts deleted."""
    run = list_runs(fs, run_path).get(run_path.rsplit("/", 1)[-1])
    if run is None or run.sealed_reading_set() is None:
        return 0  # no seal of these parts: they stay the run's rows
    paths = [stored.path for parts in run.parts.values() for _, stored in parts]
    remove(fs, paths)
    return len(paths)


def remove(fs: Any, paths: list[str]) -> None:
    """Delete objects, many a request where the store can."""
    from driftdesk.rundir.s3_client import BotocoreS3

    if not paths:
        return
    if isinstance(fs, BotocoreS3):
        fs.remove_many(paths)
    else:
        fs.rm(paths)


def bundle_paths(run_path: str, seq: int) -> tuple[str, str]:
    stem = f"{run_path}/{BUNDLES}/{seq:0{BUNDLE_DIGITS}d}"
    return f"{stem}.bin", f"{stem}.json"


def bundled_files(
    fs: Any, run: StoredRun, fetched: dict[str, bytes] | None = None
) -> dict[str, tuple[StoredObject, int, int]]:
    """Each bundled file's (bundle, offset, size) by its path relative to the run, the
    latest bundle's copy of a path winning (indexes from ``fetched`` when there)."""
    indexes = [index for _, index in run.bundles.values()]
    missing = [i for i in indexes if fetched is None or i.path not in fetched]
    got = {**(fetched or {}), **fetch_many(fs, missing)}
    files: dict[str, tuple[StoredObject, int, int]] = {}
    for seq in sorted(run.bundles):
        data, index = run.bundles[seq]
        try:
            entries = json.loads(got[index.path])["files"]
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"{index.path}: not a bundle index") from None
        for relative, offset, size in entries:
            files[str(relative)] = (data, int(offset), int(size))
    return files


def read_ranges(fs: Any, ranges: list[tuple[StoredObject, int, int]]) -> list[bytes]:
    """The bytes ``[offset, offset + size)`` of each object, read at once (ranged reads)."""
    wanted = [r for r in ranges if r[2] > 0]  # an empty file is read from nowhere
    got = iter(
        fs.cat_ranges(
            [o.path for o, _, _ in wanted],
            [offset for _, offset, _ in wanted],
            [offset + size for _, offset, size in wanted],
            on_error="return",
        )
        if wanted
        else []
    )
    out = []
    for stored, _, size in ranges:
        data = next(got) if size > 0 else b""
        if isinstance(data, BaseException) or len(data) != size:
            raise Changed(stored.path)
        out.append(bytes(data))
    return out


def put(fs: Any, path: str, data: bytes) -> None:
    try:
        fs.pipe_file(path, data)
    except PermissionError as exc:
        raise StoreError(f"the store refused to write {path}: {exc}") from None


def check_writable(fs: Any, root: str) -> None:
    """Write and delete a probe object under ``root``: a store that refuses is said before a
    run spends anything (``StoreError``)."""
    import uuid

    probe = f"{root}/.driftdesk-probe-{uuid.uuid4().hex}"
    try:
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except PermissionError as exc:
        raise StoreError(f"the store refused to write under {root}: {exc}") from None
    except FileNotFoundError:
        raise StoreError(f"{root}: no such bucket") from None


def owner_token(local_run_dir: Path) -> str:
    """Who publishes a run: this machine and this local run dir (the same after a resume
    here, another on another machine)."""
    where = f"{socket.gethostname()}\0{Path(local_run_dir).resolve()}"
    return hashlib.sha256(where.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def take_lock(fs: Any, run_path: str, token: str, *, take_over: bool = False) -> None:
    """Create the run's lock object for ``token`` (a conditional write: only if absent). Held
    by another publisher, a ``StoreError`` names it, unless ``take_over``."""
    path = f"{run_path}/{LOCK_OBJECT}"
    body = json.dumps(
        {"owner": token, "host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
    ).encode()
    try:
        fs.pipe_file(path, body, mode="create")
        return
    except FileExistsError:
        pass
    except PermissionError as exc:
        raise StoreError(f"the store refused to write {path}: {exc}") from None
    try:
        held = json.loads(fs.cat_file(path))
    except (FileNotFoundError, ValueError):
        held = {}
    if held.get("owner") == token or take_over:
        put(fs, path, body)
        return
    since = held.get("since")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(since)) if since else "?"
    raise StoreError(
        f"{run_path.rsplit('/', 1)[-1]} is published by {held.get('host', '?')} "
        f"(pid {held.get('pid', '?')}, since {when}): two machines never resume one run "
        "(resume or push --take-over if that machine is gone)"
    )


def release_lock(fs: Any, run_path: str, token: str) -> None:
    path = f"{run_path}/{LOCK_OBJECT}"
    try:
        held = json.loads(fs.cat_file(path))
    except (FileNotFoundError, ValueError):
        return
    if held.get("owner") == token:
        fs.rm_file(path)


def publishable_files(run_dir: Path) -> list[tuple[str, os.stat_result]]:
    """A local run dir's files published whole, by path relative to it (sorted), with their
    stat: not the manifest (published last), nor the growing files (published as parts), nor
    its hidden top-level entries (the process lock, the manifest reserve, caches of derived
    data: this machine's own). One stat a file (a publisher walks the run every second)."""
    found: list[tuple[str, os.stat_result]] = []
    skipped_at_top = (*GROWING_FILES, MANIFEST_FILE)

    def walk(folder: str, prefix: str) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return  # gone meanwhile
        for entry in entries:
            if not prefix and (entry.name.startswith(".") or entry.name in skipped_at_top):
                continue
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir():
                    walk(entry.path, f"{prefix}{entry.name}/")
                elif entry.is_file():
                    found.append((f"{prefix}{entry.name}", entry.stat()))
            except OSError:
                continue

    walk(str(run_dir), "")
    return sorted(found, key=lambda item: item[0])
