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
publisher's end, or ``push``) also gets ``sealed/<digest>.bin``: its reading set (manifest
and the two growing files as the parts make them) in one object, so a first read fetches one
object a run, not three (the store's cost is per request). Its name is the digest of the
manifest's ETag and the parts' ends it was made with (``sealed_path``): a run resumed or grown
since no longer matches its listing, and is read from its parts.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from driftdesk.rundir.layout import ATTEMPTS_FILE, CALLS_FILE, MANIFEST_FILE

EXTRA = "remote"
INSTALL_EXTRA = f"pip install 'driftdesk[{EXTRA}]'"
PARTS_SUFFIX = ".parts"  # attempts.jsonl.parts/<offset>.jsonl
BUNDLES = "files.parts"  # files.parts/<seq>.bin + <seq>.json
BUNDLE_DIGITS = 8
PART_DIGITS = 16
LOCK_OBJECT = "publish.lock"
SEALED = "sealed"  # sealed/<digest>.bin: a run's reading set in one object
GROWING_FILES = (ATTEMPTS_FILE, CALLS_FILE)

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# What each store's fsspec implementation is called, for the line a missing one gets.
_IMPLEMENTATIONS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs"}
_IMPLEMENTATIONS |= {"abfs": "adlfs", "abfss": "adlfs"}


class StoreError(Exception):
    """Object storage could not be used as asked (one line, never a credential)."""


class MissingExtra(StoreError):
    """The URL's store needs a package this install lacks (the line says which)."""


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


def reading_filesystem(url: str) -> Any:
    """The filesystem a reader of ``url`` uses: for ``s3://``, a ``DeferredS3`` (its listing
    through botocore alone, s3fs made only when an object is read), else ``filesystem``."""
    if protocol_of(url) in ("s3", "s3a") and _plain_s3():
        return DeferredS3(url)
    return filesystem(url)


def _plain_s3() -> bool:
    """Whether s3fs would be botocore's default client: s3fs and botocore are installed and
    no fsspec configuration gives s3fs settings of its own (then s3fs lists, as it reads)."""
    from importlib.util import find_spec

    if any(find_spec(name) is None for name in ("fsspec", "s3fs", "botocore")):
        return False  # ``filesystem`` says what to install
    # fsspec's configuration comes from FSSPEC_* variables and the files of its folder: when
    # there are none, it has nothing for s3fs (and fsspec's import, ~0.07 s, is spared)
    folder = os.environ.get("FSSPEC_CONFIG_DIR", os.path.expanduser("~/.config/fsspec"))
    if not any(k.startswith("FSSPEC_") for k in os.environ) and not os.path.isdir(folder):
        return True
    try:
        from fsspec.config import conf
    except ImportError:
        return False
    return not conf.get("s3") and not conf.get("s3a")


class DeferredS3:
    """An ``s3://`` store read without s3fs: an unchanged history costs one listing, and
    s3fs's imports (aiobotocore, aiohttp: ~0.3 s) were most of that. The listing
    (``list_objects``) and whole objects (``fetch_objects``) go through botocore's own client,
    with the same chain of credentials and endpoint as s3fs's; anything else (ranged reads,
    writes) through s3fs, made on first use."""

    CONNECTIONS = 32  # objects fetched at once

    def __init__(self, url: str) -> None:
        self.url = url
        self._fs: Any = None
        self._s3: Any = None

    def real(self) -> Any:
        if self._fs is None:
            self._fs = filesystem(self.url)
        return self._fs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)

    @staticmethod
    def _strip_protocol(url: str) -> str:
        return re.sub(r"^s3a?://", "", url).rstrip("/")

    def list_objects(self, root: str) -> dict[str, dict[str, Any]] | None:
        """Every object under ``root`` as ``fs.find(root, detail=True)`` gives it (path ->
        size, ETag), by ListObjectsV2; None when botocore could not list (s3fs lists then,
        and says why as it did)."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = root.partition("/")
        prefix = f"{key}/" if key else ""
        listed: dict[str, dict[str, Any]] = {}
        try:
            pages = self._client().get_paginator("list_objects_v2")
            pages = pages.paginate(Bucket=bucket, Prefix=prefix)
            for page in pages:
                for item in page.get("Contents", ()):
                    listed[f"{bucket}/{item['Key']}"] = {
                        "size": item["Size"],
                        "ETag": item["ETag"],
                        "type": "file",
                    }
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchBucket", "404"):
                return {}
            if code in ("AccessDenied", "403", "AllAccessDisabled", "InvalidAccessKeyId"):
                raise StoreError(f"the store refused to list {root}: {code}") from None
            return None
        except BotoCoreError:
            return None
        return listed

    def _client(self) -> Any:
        if self._s3 is None:
            import botocore.session
            from botocore.config import Config

            session = botocore.session.get_session()
            config = Config(max_pool_connections=self.CONNECTIONS)
            self._s3 = session.create_client("s3", config=config)
        return self._s3

    def fetch_objects(self, wanted: list[StoredObject]) -> dict[str, bytes]:
        """``fetch_many`` by botocore's client, ``CONNECTIONS`` objects at once."""
        from concurrent.futures import ThreadPoolExecutor

        from botocore.exceptions import BotoCoreError, ClientError

        client = self._client()

        def get(stored: StoredObject) -> bytes:
            bucket, _, key = stored.path.partition("/")
            try:
                data = bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code in ("NoSuchKey", "404", "NoSuchBucket"):
                    raise Changed(stored.path) from None
                if code in ("AccessDenied", "403"):
                    raise StoreError(f"the store refused to read {stored.path}: {code}") from None
                raise StoreError(f"{stored.path}: {code or exc}") from None
            except BotoCoreError as exc:
                raise StoreError(f"{stored.path}: {exc}") from None
            if len(data) != stored.size:
                raise Changed(stored.path)
            return data

        with ThreadPoolExecutor(min(self.CONNECTIONS, len(wanted))) as pool:
            return dict(zip((o.path for o in wanted), pool.map(get, wanted), strict=True))


def part_name(offset: int) -> str:
    return f"{offset:0{PART_DIGITS}d}.jsonl"


def part_offset(name: str) -> int | None:
    stem = name.removesuffix(".jsonl")
    return int(stem) if name.endswith(".jsonl") and stem.isdigit() else None


@dataclass(frozen=True)
class StoredObject:
    path: str  # as the filesystem names it (no protocol)
    size: int
    etag: str  # the store's ETag (or generation / version id): what caches key on


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
        """What a reader's copy of this run keys on: the ETags of its reading set."""
        return [
            None if self.manifest is None else self.manifest.etag,
            {name: [[o, p.etag] for o, p in parts] for name, parts in sorted(self.parts.items())},
        ]

    def published_end(self, name: str) -> int:
        """The byte offset of ``name`` that its published parts reach."""
        return max((o + p.size for o, p in self.parts.get(name, [])), default=0)

    def sealed_reading_set(self) -> StoredObject | None:
        """The sealed object holding this run's reading set as listed (None: none matches
        the manifest and parts listed)."""
        if self.manifest is None or not self.sealed:
            return None
        ends = {}
        for name in GROWING_FILES:
            chosen = parts_to_read(self.parts.get(name, []))
            ends[name] = chosen[-1][0] + chosen[-1][1].size if chosen else 0
        return self.sealed.get(sealed_path(self.path, self.manifest.etag, ends))


def sealed_path(run_path: str, manifest_etag: str, ends: dict[str, int]) -> str:
    """Where the reading set made of the manifest with ``manifest_etag`` and the growing files
    up to ``ends`` is sealed."""
    made_of = json.dumps([manifest_etag, [ends.get(name, 0) for name in GROWING_FILES]])
    return f"{run_path}/{SEALED}/{hashlib.sha256(made_of.encode()).hexdigest()[:32]}.bin"


def seal(manifest: bytes, files: dict[str, bytes]) -> bytes:
    """A reading set as one object: a JSON line of the sizes, then the manifest and the
    growing files' bytes one after another."""
    sizes = {MANIFEST_FILE: len(manifest), **{n: len(files.get(n, b"")) for n in GROWING_FILES}}
    return b"".join(
        [json.dumps(sizes).encode(), b"\n", manifest, *(files.get(n, b"") for n in GROWING_FILES)]
    )


def unseal(stored: StoredObject, data: bytes) -> dict[str, memoryview]:
    """The manifest's and each growing file's bytes in a sealed object (``StoreError`` when
    it is not one)."""
    head_end = data.find(b"\n")
    try:
        sizes = json.loads(data[:head_end])
        names = [MANIFEST_FILE, *GROWING_FILES]
        lengths = [int(sizes[name]) for name in names]
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"{stored.path}: not a sealed reading set") from None
    if head_end < 0 or head_end + 1 + sum(lengths) != len(data):
        raise StoreError(f"{stored.path}: not a sealed reading set")
    view, found, at = memoryview(data), {}, head_end + 1
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
    if isinstance(fs, DeferredS3):
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


class Changed(Exception):
    """An object listed was gone or of another size when read: list again."""


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
    if isinstance(fs, DeferredS3):
        return fs.fetch_objects(wanted)
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


def publishable_files(run_dir: Path) -> list[Path]:
    """A local run dir's files published whole, the manifest excepted (published last): not
    the growing files (published as parts), nor its hidden top-level entries (the process
    lock, the manifest reserve, caches of derived data: this machine's own)."""
    found = []
    for path in sorted(Path(run_dir).rglob("*")):
        relative = path.relative_to(run_dir)
        if path.is_symlink() or not path.is_file():
            continue
        top = relative.parts[0]
        if top.startswith(".") or (
            len(relative.parts) == 1 and top in (*GROWING_FILES, MANIFEST_FILE)
        ):
            continue
        found.append(path)
    return found
