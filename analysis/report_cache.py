"""The report JSON of runs reported before, kept in the user's cache: ``report --format json``
of unchanged runs with the same options prints what it printed, without reading a row.

An entry is keyed by the report's **identity**: the code digest (``analysis.cache_store``:
every module of ``analysis``, and DuckDB's version), the options (the price table included),
and per run its resolved attempts path and the identity (``cache_store.file_identity``:
device, inode, size, mtime, ctime) of the file its rows are read from (a zero-copy import's
source) and of its manifest. Any of them differs, and the report is made again (through the row cache) and
kept anew. An entry holds the JSON text and the warnings the report gave (skipped lines), so a
kept report warns as the first did.

An entry is its key line, the seal of the rest (size and sha256, ``analysis.cache_seal``), the
warnings and the JSON text: one cut short (a power cut mid-write), edited, or whose text was
replaced under its header is no entry (checked by reading it whole before a byte is printed),
and the report is made again.

It is derived: deleting it changes no figure. The newest ``CACHE.keep`` entries are kept (one
per selection of runs and options, ``CACHE.keep_bytes`` at most); a report whose runs changed while it
was made is not kept.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from driftdesk.analysis import cache_seal, cache_store, zero_copy
from driftdesk.analysis.cache_store import file_identity
from driftdesk.analysis.prices import ModelPrice
from driftdesk.analysis.sources import RunSource
from driftdesk.rundir import MANIFEST_FILE

CACHE = cache_store.declare(
    cache_store.Declared(
        name="report",
        format=3,  # 3: the store's entry and file identity
        what="kept reports",
        keys_on="the options and prices; each run's paths and the identity of its rows and "
        "manifest",
        user_part="report",
        names_runs=True,
        keep=8,  # a report is ~500 bytes per task
        keep_bytes=256 << 20,  # and at most this much of them (the newest first)
    )
)


def write_json(
    sources: Sequence[Path | str],
    out: IO[str],
    *,
    warn: Callable[[str], None],
    task_curves: bool = False,
    **options: Any,
) -> None:
    """``report.write_report_json`` of ``sources`` to ``out``, or the text kept for them
    (see the module); ``warn`` gets each warning (a skipped line) either way."""
    from driftdesk.analysis.report import ReportOptions, write_report_json
    from driftdesk.analysis.sources import resolve_sources

    if not cache_store.enabled():

        def warn_of(report: Any) -> None:
            for line in skipped_warnings(report):
                warn(line)

        write_report_json(
            sources, out, task_curves=task_curves, on_report=warn_of,  # type: ignore[arg-type]
            **options,
        )  # fmt: skip
        return
    settings = ReportOptions(**options)
    prices = settings.loaded_prices()  # a broken price table is refused, kept report or not
    keyed = {"task_curves": task_curves, **{k: v for k, v in options.items() if k != "prices"}}
    key = identity(resolve_sources(sources), keyed, prices)
    path = entry_file(key)
    kept = load(path, key)
    if kept is not None:
        warnings, handle = kept
        with handle:
            for line in warnings:
                warn(line)
            # one decoder across chunks: a character may be cut at a chunk's end
            decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
            while chunk := handle.read(1 << 20):
                out.write(decoder.decode(chunk))
            out.write(decoder.decode(b"", final=True))
        return
    writer = Writer(path, key)
    warnings = []

    def on_report(report: Any) -> None:
        for line in skipped_warnings(report):
            warn(line)
            warnings.append(line)

    class Tee:
        def write(self, piece: str) -> int:
            writer.text(piece)
            return out.write(piece)

    try:
        write_report_json(
            sources, Tee(), task_curves=task_curves, on_report=on_report,  # type: ignore[arg-type]
            **{**options, "prices": prices},
        )  # fmt: skip
    except BaseException:
        writer.drop()
        raise
    writer.keep(warnings, identity(resolve_sources(sources), keyed, prices))


def skipped_warnings(report: Any) -> list[str]:
    """A report's warnings: its skipped lines (the first few by line) and how many more."""
    lines = [str(line) for line in report.skipped_lines]
    hidden = report.skipped_line_count - len(report.skipped_lines)
    if hidden > 0:
        lines.append(f"{report.source}: {hidden} more lines skipped")
    return lines


def identity(
    runs: Sequence[RunSource], options: dict[str, Any], prices: dict[str, ModelPrice]
) -> list[Any]:
    """A report's identity (see the module)."""
    priced = sorted((model, asdict(price)) for model, price in prices.items())
    return [options, priced, [_run_identity(run) for run in runs]]


def _run_identity(run: RunSource) -> list[Any]:
    linked = zero_copy.linked_source(run.manifest)
    rows_path = run.attempts_path if linked is None else linked.path
    manifest = None if run.run_dir is None else run.run_dir / MANIFEST_FILE
    return [
        str(run.attempts_path.resolve()),
        # the report names its files as they were given (relative to the working folder)
        [str(run.attempts_path), str(run.run_dir), os.getcwd()],
        file_identity(rows_path),
        None if manifest is None else file_identity(manifest),
    ]


def entry_file(key: list[Any]) -> Path:
    """One entry per selection (the same runs and options): a changed run overwrites it."""
    return CACHE.entry_file([key[0], key[1], [run[0] for run in key[2]]])


def load(path: Path, key: list[Any]) -> tuple[list[str], IO[bytes]] | None:
    """(the warnings, the open entry positioned at the JSON text) if kept under ``key`` and
    whole (``cache_seal.open_sealed``: read once through before anything is printed)."""
    handle = CACHE.open(path, key)
    if handle is None:
        return None
    try:
        warnings = json.loads(handle.readline())
        if isinstance(warnings, list) and all(isinstance(w, str) for w in warnings):
            return warnings, handle
    except (OSError, ValueError):  # not ours to trust: made again
        pass
    handle.close()
    return None


class Writer:
    """An entry being written beside the report (a temp file in the cache folder, so a
    report of any size is never held in memory): ``text`` for each piece printed, then
    ``keep`` (only if the runs did not change meanwhile) or ``drop``."""

    def __init__(self, path: Path, key: list[Any]) -> None:
        self.path, self.key = path, key
        self.temp: IO[str] | None = None
        self.written = 0
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=".part-", suffix=".json")
            self.temp = open(fd, "w", encoding="utf-8", errors="surrogatepass")  # noqa: SIM115
            self.temp_path = Path(name)

    def text(self, piece: str) -> None:
        if self.temp is not None:
            # bytes: an ASCII piece (most of a report) is not encoded to count them
            self.written += (
                len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
            )
            if self.written > (CACHE.keep_bytes or 0):  # never kept (pruned): not written further
                self.drop()
                return
            try:
                self.temp.write(piece)
            except OSError:
                self.drop()

    def keep(self, warnings: list[str], after: list[Any]) -> None:
        """Keep the entry under its key if ``after`` (the identity now) is still it."""
        temp = self.temp
        if temp is None:
            return
        if after != self.key:
            self.drop()
            return
        final = self.temp_path.with_suffix(".tmp")
        try:
            temp.close()
            warned = json.dumps(warnings).encode() + b"\n"
            digest = hashlib.sha256(warned)
            with open(self.temp_path, "rb") as body:
                while chunk := body.read(1 << 20):
                    digest.update(chunk)
                size = len(warned) + body.tell()
            seal = cache_seal.seal_line([size, digest.hexdigest()])
            with open(final, "wb") as out, open(self.temp_path, "rb") as body:
                out.write(CACHE.entry_line(self.key) + b"\n" + seal + b"\n" + warned)
                while chunk := body.read(1 << 20):
                    out.write(chunk)
            os.chmod(final, 0o600)
            # sealed and checked whole on read: a torn entry is no entry, so no fsync
            os.replace(final, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                final.unlink()
        finally:
            self.temp = None
            with contextlib.suppress(OSError):
                self.temp_path.unlink()
        CACHE.prune(self.path.parent)

    def drop(self) -> None:
        temp, self.temp = self.temp, None
        if temp is not None:
            with contextlib.suppress(OSError):
                temp.close()
            with contextlib.suppress(OSError):
                self.temp_path.unlink()
