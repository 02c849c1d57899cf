"""Runs in object storage on the command line: ``push`` and ``pull``, and the one place a URL
given where a command takes a run dir or a folder of runs is resolved (``place_urls``, called
by ``main`` on the parsed arguments):

- ``run --out URL``: the run goes to a staging folder (shown) and is published as it goes;
- ``resume`` of a staged run (or of a run's URL: pulled into staging first) publishes again,
  under the run's lock object;
- ``report``, ``compare``, ``check``, ``trend``, ``explain``, ``tasks``, ``plot`` and ``tui
  --runs`` read a URL through its local view (``driftdesk.rundir.remote_view``);
- anywhere else a URL is refused: it is never taken for a folder name (``Path("s3://b/p")``
  is the folder ``s3:/b/p``).

This module is imported by ``main`` only when a URL is on the command line, and imports
fsspec only through ``driftdesk.rundir.store`` (a plain install says which extra to add).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.rundir import store
from driftdesk.terminal import printable, printable_path

if TYPE_CHECKING:
    from driftdesk.reruns.publish import PublishingChild

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
VIEW_REFRESH_S = 5.0  # the workbench over a bucket: its views brought in step this often

# The arguments of each command that read runs and take a URL in place of a local path.
READ_IN_PLACE = {
    "report": ("runs",),
    "compare": ("run_a", "run_b"),
    "check": ("run", "baseline", "runs"),
    "trend": ("run_dirs", "runs"),
    "explain": ("run",),
    "tasks": ("runs",),
    "plot": ("run",),
    "tui": ("runs",),
}
# Arguments that name a local file or folder: a URL there is refused, never made a folder.
LOCAL_PATHS: tuple[str, ...] = ("out", "run_dir", "runs", "run", "run_a", "run_b", "baseline")
LOCAL_PATHS += ("run_dirs", "only_failed", "only_volatile", "relink", "source")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "push",
        help="publish run dirs (or folders of them) to object storage (s3://bucket/prefix)",
        description="Publish existing runs whole to URL/<run_id> (s3://…, or any fsspec URL "
        "whose filesystem is installed). Credentials come from the store's own chain "
        "(environment, ~/.aws, profiles, instance roles). Needs driftdesk[remote].",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run dirs or folders of runs, then URL")
    p.add_argument(
        "--take-over",
        action="store_true",
        help="publish even though another machine's lock object holds the run (it is gone)",
    )
    p.set_defaults(func=cmd_push)
    q = sub.add_parser(
        "pull",
        help="bring a run down from object storage into a local folder",
        description="Copy the run at URL (s3://bucket/prefix/<run_id>) into OUT/<run_id>.",
    )
    q.add_argument("url", metavar="URL")
    q.add_argument("--out", default="runs", help="folder for the run dir (default ./runs)")
    q.set_defaults(func=cmd_pull)


def _run_dirs(path: Path) -> list[Path]:
    from driftdesk.rundir.catalog import run_dirs_in
    from driftdesk.rundir.layout import MANIFEST_FILE

    if (path / MANIFEST_FILE).is_file():
        return [path]
    return sorted(run_dirs_in(path)) if path.is_dir() else []


def cmd_push(args: argparse.Namespace) -> int:
    from driftdesk.reruns.publish import push

    if len(args.runs) < 2 or not store.is_url(args.runs[-1]):
        return _fail("push takes RUN... URL: run dirs (or folders of them), then the URL")
    url = args.runs[-1]
    run_dirs: list[Path] = []
    for given in args.runs[:-1]:
        if store.is_url(given):
            return _fail(f"push publishes local runs: {given} is a URL (one URL, last)")
        found = _run_dirs(Path(given))
        if not found:
            return _fail(f"{printable_path(given)}: not a run dir nor a folder of runs")
        run_dirs.extend(found)
    from driftdesk.analysis.import_formats import ResultsImportError
    from driftdesk.analysis.sources import SourceError

    try:
        with tempfile.TemporaryDirectory(prefix="driftdesk-push-") as scratch:
            for run_dir in run_dirs:
                local = _self_contained(run_dir, Path(scratch))
                published = push(local, url, take_over=args.take_over)
                print(printable(f"published: {published}"))
    except (store.StoreError, SourceError, ResultsImportError) as exc:
        return _fail(str(exc), _exit_code(exc))
    return 0


def _self_contained(run_dir: Path, scratch: Path) -> Path:
    """A zero-copy import reads its rows from a file outside its run dir: pushed, it is
    imported again with ``--copy`` (same run id, same reading of the file) into ``scratch``,
    so the bucket holds its rows."""
    from driftdesk.analysis import zero_copy
    from driftdesk.analysis.imports import import_results
    from driftdesk.analysis.zero_copy import linked_source
    from driftdesk.rundir import read_manifest

    manifest = read_manifest(run_dir)
    linked = linked_source(manifest)
    if linked is None:
        return run_dir
    zero_copy.check(linked, str(run_dir))  # a changed source is refused, as a report does
    return import_results(
        linked.path,
        fmt="jsonl",
        task_field=linked.task_field,
        success_field=linked.success_field,
        score_threshold=linked.score_threshold,
        out=scratch,
        run_id=run_dir.name,
        copy=True,
    ).run_dir


def cmd_pull(args: argparse.Namespace) -> int:
    from driftdesk.reruns.publish import pull

    if not store.is_url(args.url):
        return _fail(f"pull takes a URL (s3://bucket/prefix/<run_id>), not {args.url}")
    if store.is_url(args.out):
        return _fail("pull --out takes a local folder")
    try:
        run_dir = pull(args.url, Path(args.out))
    except store.StoreError as exc:
        return _fail(str(exc), _exit_code(exc))
    print(printable(f"pulled: {printable_path(run_dir)}"))
    return 0


def _exit_code(exc: Exception) -> int:
    return EXIT_BAD_INPUT if isinstance(exc, store.MissingExtra) else EXIT_FAILED


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(printable(f"driftdesk: {message}", keep_newlines=False), file=sys.stderr)
    return code


def urls_in(argv: list[str]) -> dict[str, str]:
    """Each URL on the command line, by itself and by what ``Path`` makes of it."""
    found = {}
    for token in argv:
        value = token.split("=", 1)[1] if token.startswith("--") and "=" in token else token
        if store.is_url(value):
            found[value] = value
            found[str(Path(value))] = value
    return found


def place_urls(args: argparse.Namespace, argv: list[str]) -> int | None:
    """Resolve the URLs among ``args``' run arguments (see the module's docstring); an exit
    code when one is refused or cannot be used (its line printed)."""
    urls = urls_in(argv)
    command = getattr(args, "command", None)

    def url_of(value: Any) -> str | None:
        return urls.get(str(value)) if isinstance(value, str | Path) else None

    try:
        if command == "run" and url_of(getattr(args, "out", None)):
            _run_to_store(args, str(url_of(args.out)))
        if command == "resume":
            return _resume(args, url_of(args.run_dir))
        for name in READ_IN_PLACE.get(str(command), ()):
            _read_in_place(args, name, url_of)
    except store.StoreError as exc:
        return _fail(str(exc))
    for name in () if command in ("push", "pull") else LOCAL_PATHS:
        values = getattr(args, name, None)
        for value in values if isinstance(values, list) else [values]:
            url = url_of(value)
            if url is not None:
                flag = f"--{name.replace('_', '-')}" if name in ("out", "only_failed") else name
                return _fail(
                    f"{command} {flag} takes a local path, not a URL ({url}): push and pull "
                    "move runs to and from a bucket"
                )
    return None


def _read_in_place(
    args: argparse.Namespace, name: str, url_of: Callable[[Any], str | None]
) -> None:
    from driftdesk.rundir.remote_view import view

    values = getattr(args, name, None)
    many = isinstance(values, list)
    task_ids = (str(args.task_id),) if getattr(args, "command", None) == "explain" else ()
    placed: list[Any] = []
    viewed: list[str] = []
    for value in list(values) if isinstance(values, list) else [values]:
        url = url_of(value)
        if url is None:
            placed.append(value)
            continue
        local = view(url, task_ids=task_ids)
        viewed.append(url)
        placed.append(str(local) if isinstance(value, str) else local)
    setattr(args, name, placed if many else placed[0])
    if viewed and args.command == "tui":
        _keep_in_step(viewed)


_REFRESHING: list[threading.Event] = []  # each workbench view refresher's stop switch


def _keep_in_step(urls: list[str]) -> None:
    """While the workbench is open, bring its bucket views in step (a teammate's live run
    grows on screen as the workbench follows local runs)."""
    from driftdesk.rundir.remote_view import view

    stop = threading.Event()
    _REFRESHING.append(stop)

    def refresh() -> None:
        while not stop.wait(VIEW_REFRESH_S):
            for url in urls:
                try:
                    view(url)
                except Exception:  # a listing that failed now (any store's error): next time
                    continue

    threading.Thread(target=refresh, name="driftdesk-remote-views", daemon=True).start()


def stop_refreshing() -> None:
    """Stop every view refresher this process started (the workbench closed)."""
    while _REFRESHING:
        _REFRESHING.pop().set()


def _run_to_store(args: argparse.Namespace, url: str) -> None:
    from driftdesk.reruns.publish import PublishingChild, staging_folder

    url = store.normal_url(url)
    store.client(url)  # a missing extra is said before anything runs
    staging = staging_folder(url)
    args.out = staging
    # started now, so that its start overlaps the run's imports; ready before the run starts
    args.func = _publishing(args.func, PublishingChild(url, staging), staging, new=True)


def _resume(args: argparse.Namespace, url: str | None) -> int | None:
    from driftdesk.reruns.publish import PublishingChild, prepare_staging, pull, remote_of_staging
    from driftdesk.rundir.remote_view import is_view, url_of_view

    if url is not None:
        url = store.normal_url(url)
        parent, run_id = url.rsplit("/", 1)
        staging = prepare_staging(parent)
        run_dir = staging / run_id
        if not run_dir.is_dir():
            run_dir = pull(url, staging)
        args.run_dir = run_dir
    run_dir = Path(args.run_dir)
    if is_view(run_dir):
        shown = url_of_view(run_dir) or "its URL"
        return _fail(f"{printable_path(run_dir)} is a read-only view of {shown}: resume {shown}")
    remote = remote_of_staging(run_dir)
    if remote is None:
        return None
    take_over = bool(getattr(args, "take_over", False))
    # another machine's lock refuses the resume before it starts (``ready``)
    publisher = PublishingChild(remote, run_dir.parent, run_dir=run_dir, take_over=take_over)
    args.func = _publishing(args.func, publisher, run_dir, new=False)
    return None


def _publishing(
    func: Callable[[argparse.Namespace], int],
    publisher: PublishingChild,
    staging: Path,
    *,
    new: bool,
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        # the run's own imports (~0.35 s) while the publisher starts beside it
        import driftdesk.reruns.run_start  # noqa: F401
        from driftdesk.reruns.publish import prepare_staging

        try:
            publisher.ready()
        except store.StoreError as exc:
            return _fail(str(exc))
        if new:
            prepare_staging(publisher.url)
        args.run_listener = publisher  # its RunStarted names the run dir to publish
        going = " as the run goes" if new else ""
        print(
            printable(f"staging: {printable_path(staging)} (published to {publisher.url}{going})"),
            file=sys.stderr,
        )
        try:
            code = int(func(args) or 0)
        finally:
            publisher.stop()
        for url in publisher.published:
            print(printable(f"published: {url}"))
        if publisher.problem:
            _fail(
                f"publishing to {publisher.url} failed: {publisher.problem}; the run is whole "
                f"in {printable_path(publisher.staging)} (driftdesk push RUN_DIR "
                f"{publisher.url} publishes it)",
                EXIT_FAILED,
            )
            return code or EXIT_FAILED
        return code

    return run
