"""Publishing runs to object storage as they go (``run --out s3://…``) and whole (``push``).

A run is durable locally first, exactly as without a URL: it runs in a staging folder
(``staging_folder``, named and shown), fsynced row by row, resumable. A ``Publisher`` thread
copies what is new every second, less often as the run ages (``tick_wait``, at most every
30 s) — the growing files as immutable parts of whole
lines (``driftdesk.rundir.store``: the layout is its), the manifest when it was replaced, the
per-attempt files (logs, transcripts, recordings, workspaces) once they have settled — and at
the end what is left, then the final manifest and its seal, then it lets go of the run's lock
object. A publisher killed mid-way leaves parts up to some line and its lock; a resume on the
same machine takes the lock again (same owner) and publishes from where the bucket ends.

A run that publishes as it goes (``run``/``resume`` of a URL) has its ``Publisher`` in a
child process of its own (``PublishingChild``, ``python -m driftdesk.reruns.publish``): its
work (botocore's import and client, walking the run dir, sending parts) takes a core the run
does not use, never the run's GIL from the metering proxy and the attempts, and its start
(~0.35 s) overlaps the run's own imports. It publishes the run this process started (its
``RunStarted`` event names the run dir: a second run to the same URL from another terminal,
staged beside it, is its own publisher's). It says when it is ready (the store is writable, a
resumed run's lock is taken) or why not, before the run spends anything; told to finish, it
publishes every run whole and says what it published. Its parent killed (its stdin closed
unsaid), it stops at once, as a thread of the killed process would: parts up to some line, the
lock kept, for a resume to go on from.

The publisher is driftdesk's, never a harness: the store's credentials (its own chain:
environment, ``~/.aws``, instance roles) stay out of the harness's environment
(``providers.harness_env``'s allow-list has no ``AWS_*``), so the agent under test cannot
write the team's history; and the publisher's environment holds what the stores' chains read
(``publisher_environment``), no provider's key.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.rundir import store
from driftdesk.rundir.layout import MANIFEST_FILE

DEFAULT_INTERVAL_S = 1.0
# Each tick with new lines puts a part of each growing file (and a bundle): one a second would
# leave 7,200 objects a run-hour that every listing of the history enumerates. So the wait
# grows with the publisher's age, a second per minute of it, to at most this: a teammate sees
# rows at most this late, and an hour's run leaves about 320 parts a file, not 3,600.
MAX_INTERVAL_S = 30.0


def tick_wait(age_s: float, interval: float = DEFAULT_INTERVAL_S) -> float:
    """How long a publisher ``age_s`` seconds old waits before its next tick."""
    return min(MAX_INTERVAL_S, max(interval, age_s / 60.0))


BUNDLE_BYTES = 64 * 2**20  # the per-attempt files published as one object, at most
SETTLED_S = 2.0  # a per-attempt file unchanged this long is published while the run goes
REMOTE_MARKER = ".driftdesk-remote.json"  # in a staging folder: the URL its runs go to
STAGING_FOLDER = "staging"


def staging_folder(url: str) -> Path:
    """Where runs published to ``url`` are written first (this machine's copy)."""
    import hashlib

    from driftdesk.paths import data_dir

    digest = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    name = f"{store.safe_name_of_url(url)[:60]}-{digest}"
    return data_dir() / STAGING_FOLDER / name


def prepare_staging(url: str) -> Path:
    folder = staging_folder(url)
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / REMOTE_MARKER
    if not marker.is_file():
        marker.write_text(json.dumps({"url": url}) + "\n")
    return folder


def remote_of_staging(run_dir: Path) -> str | None:
    """The URL a staged run dir is published to (None for a run dir that is not staged)."""
    try:
        data = json.loads((Path(run_dir).resolve().parent / REMOTE_MARKER).read_text())
    except (OSError, ValueError):
        return None
    url = data.get("url") if isinstance(data, dict) else None
    return url if store.is_url(url) else None


@dataclass
class _Published:
    run_path: str
    token: str
    ends: dict[str, int] = field(default_factory=dict)
    manifest_seen: tuple[int, int, int] | None = None
    locked: bool = False
    # per-attempt files published so far: relative path -> (size, mtime_ns) when put
    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    next_bundle: int = 0
    manifest_put: bytes = b""  # the manifest's bytes as last published
    sealed: set[str] = field(default_factory=set)  # the run's sealed objects there


class Publisher:
    """Publish ``run_dir``, or the run dirs announced to it (``add``: the run this process
    started, as its ``RunStarted`` event names it), to ``url``."""

    def __init__(
        self,
        url: str,
        staging: Path,
        *,
        run_dir: Path | None = None,
        interval: float = DEFAULT_INTERVAL_S,
        take_over: bool = False,
    ) -> None:
        self.url = store.normal_url(url)
        self.fs = store.client(self.url)
        self.root = store.strip_protocol(self.fs, self.url)
        self.staging = Path(staging)
        # never "whatever appears in staging": a second run to the same URL from another
        # terminal stages beside this one, and is its own publisher's
        self.run_dirs: list[Path] = [] if run_dir is None else [Path(run_dir).resolve()]
        self.interval = interval
        self.take_over = take_over
        self.runs: dict[Path, _Published] = {}
        self.problem: str | None = None
        self.published: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def take(self, run_dir: Path) -> _Published:
        """This run's publication state, its lock taken (``StoreError`` when another
        machine holds it)."""
        run_dir = Path(run_dir)
        known = self.runs.get(run_dir)
        if known is not None:
            return known
        run_path = f"{self.root}/{run_dir.name}"
        state = _Published(run_path, store.owner_token(run_dir))
        store.take_lock(self.fs, run_path, state.token, take_over=self.take_over)
        state.locked = True
        listed = store.list_runs(self.fs, run_path).get(run_dir.name)
        for name in store.GROWING_FILES:
            state.ends[name] = 0 if listed is None else listed.published_end(name)
        state.next_bundle = 0 if listed is None else listed.next_bundle()
        state.sealed = set() if listed is None else set(listed.sealed)
        self.runs[run_dir] = state
        return state

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="driftdesk-publish", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(tick_wait(time.monotonic() - started, self.interval)):
            self.tick()

    def add(self, run_dir: Path) -> None:
        """Publish ``run_dir`` too (from another thread: the list is only appended to)."""
        resolved = Path(run_dir).resolve()
        if resolved not in self.run_dirs:
            self.run_dirs.append(resolved)

    def _targets(self) -> list[Path]:
        return list(self.run_dirs)

    def tick(self) -> None:
        """Publish what is new in each run (a failure is kept and tried again next time)."""
        for run_dir in self._targets():
            if not (run_dir / MANIFEST_FILE).is_file():
                continue
            try:
                state = self.take(run_dir)
                self._grow(run_dir, state)
                self._files(run_dir, state, settled_before=time.time() - SETTLED_S)
            except (OSError, store.StoreError) as exc:
                self.problem = str(exc)
            except Exception as exc:  # a store's own error type: kept, retried
                self.problem = f"{type(exc).__name__}: {exc}"

    def _grow(self, run_dir: Path, state: _Published) -> None:
        for name in store.GROWING_FILES:
            local = run_dir / name
            end = state.ends.get(name, 0)
            try:
                size = local.stat().st_size
            except FileNotFoundError:
                continue
            if size <= end:
                continue
            with open(local, "rb") as fh:
                fh.seek(end)
                data = fh.read(size - end)
            whole = data[: data.rfind(b"\n") + 1]  # whole lines only: a torn tail waits
            if whole:
                part = f"{state.run_path}/{name}{store.PARTS_SUFFIX}/{store.part_name(end)}"
                store.put(self.fs, part, whole)
                state.ends[name] = end + len(whole)
        self._manifest(run_dir, state)

    def _files(self, run_dir: Path, state: _Published, settled_before: float | None = None) -> None:
        """Put the per-attempt files (logs, transcripts, recordings, workspaces) not yet
        published as they are now; during the run only those unchanged for ``SETTLED_S``
        (an attempt still writing its log is published later), at the end all of them."""
        todo: list[tuple[Path, str, tuple[int, int]]] = []
        for relative, stat in store.publishable_files(run_dir):
            path = run_dir / relative
            seen = (stat.st_size, stat.st_mtime_ns)
            if state.files.get(relative) == seen:
                continue
            if settled_before is not None and stat.st_mtime > settled_before:
                continue
            todo.append((path, relative, seen))
        start = 0
        while start < len(todo):  # bundles of at most BUNDLE_BYTES (a bigger file alone)
            end, size = start, 0
            while end < len(todo) and (end == start or size + todo[end][2][0] <= BUNDLE_BYTES):
                size += todo[end][2][0]
                end += 1
            self._bundle(state, todo[start:end])
            start = end

    def _bundle(self, state: _Published, todo: list[tuple[Path, str, tuple[int, int]]]) -> None:
        """One bundle of files: their bytes, then its index (a file that changed or went
        meanwhile is left for the next bundle)."""
        chunks, entries, offset, done = [], [], 0, []
        for path, relative, seen in todo:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            chunks.append(data)
            entries.append([relative, offset, len(data)])
            offset += len(data)
            if len(data) == seen[0]:
                done.append((relative, seen))
        if not entries:
            return
        data_path, index_path = store.bundle_paths(state.run_path, state.next_bundle)
        store.put(self.fs, data_path, b"".join(chunks))
        store.put(self.fs, index_path, json.dumps({"files": entries}).encode())
        state.next_bundle += 1
        for relative, seen in done:
            state.files[relative] = seen

    def _manifest(self, run_dir: Path, state: _Published, *, force: bool = False) -> None:
        path = run_dir / MANIFEST_FILE
        stat = path.stat()
        seen = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if seen != state.manifest_seen or force:
            data = path.read_bytes()
            store.put(self.fs, f"{state.run_path}/{MANIFEST_FILE}", data)
            state.manifest_seen, state.manifest_put = seen, data

    def _seal(self, run_dir: Path, state: _Published) -> None:
        """Seal the run's reading set as just published (``store.sealed_path``), and delete
        the seals it replaces."""
        manifest = f"{state.run_path}/{MANIFEST_FILE}"
        self.fs.invalidate_cache(manifest)
        etag = store.etag_of(self.fs.info(manifest))
        files = {n: (run_dir / n, state.ends[n]) for n in store.GROWING_FILES if state.ends.get(n)}
        path = store.sealed_path(state.run_path, etag, state.ends)
        store.put(self.fs, path, store.seal(state.manifest_put, files))
        for stale in state.sealed - {path}:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(stale)
        state.sealed = {path}

    def finish(self, run_dir: Path) -> None:
        """Publish ``run_dir`` whole: its new lines, every other file, then its manifest; its
        lock let go."""
        state = self.take(run_dir)
        self._grow(run_dir, state)
        self._files(run_dir, state)
        self._manifest(run_dir, state, force=True)
        self._seal(run_dir, state)
        # the seal holds them now; a store that keeps them (no delete allowed) is only slower
        with contextlib.suppress(OSError, store.StoreError):
            store.drop_parts(self.fs, state.run_path)
        store.release_lock(self.fs, state.run_path, state.token)
        state.locked = False
        self.published.append(store.join(self.url, run_dir.name))

    def stop(self) -> None:
        """Stop the thread, then publish every run whole (a failure kept in ``problem``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for run_dir in self._targets():
            if not (run_dir / MANIFEST_FILE).is_file():
                continue
            try:
                self.finish(run_dir)
            except (OSError, store.StoreError) as exc:
                self.problem = str(exc)
            except Exception as exc:
                self.problem = f"{type(exc).__name__}: {exc}"


def push(run_dir: Path, url: str, *, take_over: bool = False) -> str:
    """Publish an existing run dir to ``url`` (a folder of runs) whole; its URL."""
    run_dir = Path(run_dir)
    publisher = Publisher(url, run_dir.parent, run_dir=run_dir, take_over=take_over)
    publisher.finish(run_dir)
    return publisher.published[-1]


def pull(url: str, out: Path) -> Path:
    """Bring the run at ``url`` down into ``out/<run_id>`` (its parts joined into the files
    they make); a ``StoreError`` when it is no run or the folder exists."""
    import shutil

    from driftdesk.fileio import atomic_write_bytes

    url = store.normal_url(url)
    fs = store.client(url)
    root = store.strip_protocol(fs, url)
    run = next((r for r in store.list_runs(fs, root).values() if r.path == root), None)
    if run is None:
        raise store.StoreError(f"{url}: no run there (no {MANIFEST_FILE})")
    target = Path(out) / run.run_id
    if target.exists():
        raise store.StoreError(f"{target} exists: pull into another folder (--out)")
    staging = Path(out) / f".{run.run_id}.pulling"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for stored in run.other:
        local = staging / stored.path[len(root) + 1 :]
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(store.fetch(fs, stored))
    bundled = store.bundled_files(fs, run)
    fetched = store.fetch_many(fs, {data.path: data for data, _, _ in bundled.values()}.values())
    for relative, (data, offset, size) in bundled.items():
        local = staging / relative
        if ".." in Path(relative).parts or Path(relative).is_absolute():
            raise store.StoreError(f"{url}: a bundled file outside the run ({relative})")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(fetched[data.path][offset : offset + size])
    sealed = None if run.parts else run.sealed_reading_set()
    unsealed = {} if sealed is None else store.unseal(sealed, store.fetch(fs, sealed))
    for name in store.GROWING_FILES:
        if name in run.parts:
            (staging / name).write_bytes(store.join_parts(fs, run.parts[name]))
        elif len(unsealed.get(name, b"")):  # its parts dropped once it was sealed
            (staging / name).write_bytes(unsealed[name])
    assert run.manifest is not None
    atomic_write_bytes(staging / MANIFEST_FILE, store.fetch(fs, run.manifest), mode=0o600)
    staging.rename(target)
    return target


# What a store's credential chain and driftdesk's own paths read; nothing else of the run's
# environment (a provider's key given as OPENAI_API_KEY, say) reaches the publisher.
_CHAIN_PREFIXES: tuple[str, ...] = ("AWS_", "BOTO_", "FSSPEC_", "GOOGLE_", "GCE_", "CLOUDSDK_")
_CHAIN_PREFIXES += ("AZURE_", "LC_", "XDG_")
_CHAIN_NAMES = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "PYTHONPATH"}
_CHAIN_NAMES |= {"PYTHONHOME", "LD_LIBRARY_PATH"}  # what some Pythons need to start
_CHAIN_NAMES |= {"VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"}
_CHAIN_NAMES |= {"CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"}
_CHAIN_NAMES |= {"DRIFTDESK_CONFIG_DIR", "DRIFTDESK_DATA_DIR", "DRIFTDESK_RUNS_DIR"}


def publisher_environment() -> dict[str, str]:
    """The publisher's environment: the stores' chains' variables and driftdesk's paths."""
    return {
        name: value
        for name, value in os.environ.items()
        if name.upper() in _CHAIN_NAMES or name.upper().startswith(_CHAIN_PREFIXES)
    }


class PublishingChild:
    """A ``Publisher`` of a run that publishes as it goes, in a child process (see the
    module's docstring): ``ready`` before the run starts, ``stop`` after it ends."""

    def __init__(
        self, url: str, staging: Path, *, run_dir: Path | None = None, take_over: bool = False
    ) -> None:
        self.url = store.normal_url(url)
        self.staging = Path(staging)
        self.problem: str | None = None
        self.published: list[str] = []
        order: dict[str, Any] = {"url": self.url, "staging": str(self.staging)}
        order |= {"run_dir": None if run_dir is None else str(run_dir), "take_over": take_over}
        self._child = subprocess.Popen(
            [sys.executable, "-m", "driftdesk.reruns.publish"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=publisher_environment(),
            start_new_session=True,  # a Ctrl-C is the run's: the publisher finishes when told
        )
        self._ready: bool | None = None
        self._tell(order)

    def _tell(self, what: dict[str, Any]) -> None:
        """One line to the child (a child gone already is found out by ``stop``)."""
        assert self._child.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            self._child.stdin.write(json.dumps(what) + "\n")
            self._child.stdin.flush()

    def on_event(self, event: object) -> None:
        """A ``RunListener``: the run this process started is the one to publish."""
        from driftdesk.reruns.events import RunStarted

        if isinstance(event, RunStarted):
            self._tell({"publish": str(event.run_dir)})

    def _said(self) -> dict[str, Any]:
        assert self._child.stdout is not None
        try:
            said = json.loads(self._child.stdout.readline() or "{}")
        except ValueError:
            said = {}
        return said if isinstance(said, dict) else {}

    def ready(self) -> None:
        """Wait until the publisher is ready: the store writable, a resumed run's lock taken
        (``StoreError`` with its line when not, the child gone)."""
        if self._ready is None:
            said = self._said()
            self._ready = said.get("ready") is True
            if not self._ready:
                self._child.wait()
                why = said.get("problem") or f"it stopped (exit {self._child.returncode})"
                raise store.StoreError(str(why))

    def stop(self) -> None:
        """Have every run published whole, and wait for what was published (a failure kept
        in ``problem``)."""
        assert self._child.stdin is not None
        self._tell({"finish": True})
        with contextlib.suppress(OSError):  # a publisher that is gone already
            self._child.stdin.close()
        if self._ready is not False:
            said = self._said()
            if said.get("ready") is True:  # the run ended before it waited for it
                said = self._said()
            if "published" in said:
                self.published = [str(url) for url in said["published"]]
                self.problem = None if said.get("problem") is None else str(said["problem"])
            else:
                self.problem = f"the publisher stopped (exit {self._child.wait()})"
        self._child.wait()


def _serve_as_child() -> int:
    """``python -m driftdesk.reruns.publish``: the child of a ``PublishingChild``."""
    order = json.loads(sys.stdin.readline())

    def say(**what: object) -> None:
        print(json.dumps(what), flush=True)

    run_dir = None if order.get("run_dir") is None else Path(order["run_dir"])
    try:
        publisher = Publisher(
            order["url"], Path(order["staging"]), run_dir=run_dir, take_over=order["take_over"]
        )
        store.check_writable(publisher.fs, publisher.root)  # a store that refuses, said now
        if run_dir is not None:
            publisher.take(run_dir)  # another machine's lock refuses the resume
    except (OSError, store.StoreError) as exc:
        say(problem=str(exc))
        return 2
    except Exception as exc:  # a store's own error type: one line, never a traceback
        say(problem=f"{type(exc).__name__}: {exc}")
        return 2
    say(ready=True)
    publisher.start()
    for line in sys.stdin:
        told = json.loads(line)
        if "publish" in told:  # the run dir the run made
            publisher.add(Path(told["publish"]))
        elif told.get("finish"):
            publisher.stop()
            say(published=publisher.published, problem=publisher.problem)
            os._exit(0)  # all is said and sent: the run waits on this exit, not a teardown
    os._exit(0)  # the run's process is gone, unsaid (killed): stop here, lock kept


if __name__ == "__main__":
    raise SystemExit(_serve_as_child())
