"""Runs pushed to a bucket read in place: report, compare, check, trend, explain and tasks
over an s3:// URL give the figures of the same runs on disk; a second read of an unchanged
history fetches nothing (one listing); objects changing under a read; a bucket that is not
there or refuses; a prefix of thousands of runs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import (
    ACCESS_KEY,
    SECRET,
    Bucket,
    driftdesk,
    free_port,
    history,
    json_of,
    objects_read_whole,
    publish_live,
)

from driftdesk.rundir import remote_view, store


def _two_machines(tmp_path: Path, bucket: Bucket) -> Path:
    """Machine a and machine b each push their nights; a local folder holds both."""
    a = history(tmp_path / "machine-a", "a", 3)
    b = history(tmp_path / "machine-b", "b", 3)
    for machine in ("machine-a", "machine-b"):
        result = driftdesk("push", str(tmp_path / machine), bucket.url("nightly"))
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("published: s3://") == 3
    together = tmp_path / "together"
    for run in a + b:
        shutil.copytree(run, together / run.name)
    # a run pushed whole is its manifest and its seal: its parts dropped once sealed
    listed = bucket.objects("nightly")
    assert len(listed) == 2 * 6, sorted(listed)
    assert sum("/sealed/" in path for path in listed) == 6
    return together


def _one_part_more(bucket: Bucket, run_dir: Path) -> tuple[str, str]:
    """The run going on in the bucket grows by one part (a row more): its path, and the row."""
    run = run_dir.name
    end = store.list_runs(bucket.fs, f"{bucket.name}/nightly")[run].published_end("attempts.jsonl")
    row = (run_dir / "attempts.jsonl").read_text().splitlines()[0]
    grown = json.dumps({**json.loads(row), "attempt": 3}) + "\n"
    part = f"{bucket.name}/nightly/{run}/attempts.jsonl.parts/{store.part_name(end)}"
    bucket.fs.pipe_file(part, grown.encode())
    return part, grown


def _without_paths(report: object) -> object:
    if isinstance(report, dict):
        return {
            k: _without_paths(v)
            for k, v in report.items()
            if k not in ("path", "run_dir", "source")
        }
    if isinstance(report, list):
        return [_without_paths(v) for v in report]
    return report


def test_two_machines_history_in_a_bucket_reads_as_on_disk(bucket: Bucket, tmp_path: Path) -> None:
    together = _two_machines(tmp_path, bucket)
    url = bucket.url("nightly")
    remote = json_of(driftdesk("trend", url, "--json"))
    local = json_of(driftdesk("trend", str(together), "--json"))
    assert [r["run_id"] for r in remote["runs"]] == [r["run_id"] for r in local["runs"]]
    assert len(remote["runs"]) == 6
    assert _without_paths(remote) == _without_paths(local)

    run = "b-night01"  # has a link error and retried tries
    remote_report = json_of(driftdesk("report", bucket.url("nightly", run), "--format", "json"))
    local_report = json_of(driftdesk("report", str(together / run), "--format", "json"))
    assert _without_paths(remote_report) == _without_paths(local_report)

    compared = driftdesk(
        "compare",
        bucket.url("nightly", "a-night00"),
        bucket.url("nightly", run),
        "--format",
        "json",
    )
    local_compared = driftdesk(
        "compare", str(together / "a-night00"), str(together / run), "--format", "json"
    )
    assert _without_paths(json_of(compared)) == _without_paths(json_of(local_compared))
    checked = driftdesk("check", bucket.url("nightly", run), "--min-success", "0.1")
    local_checked = driftdesk("check", str(together / run), "--min-success", "0.1")
    assert checked.returncode == local_checked.returncode
    tasks = driftdesk("tasks", bucket.url("nightly", run), "--failed")
    assert tasks.stdout == driftdesk("tasks", str(together / run), "--failed").stdout
    assert "task-" in tasks.stdout
    # nothing driftdesk wrote holds the store's secret
    for folder in (Path.home(), tmp_path):
        for path in folder.rglob("*"):
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path


def test_an_unchanged_history_is_one_listing_and_no_file_rewritten(
    bucket: Bucket, tmp_path: Path
) -> None:
    together = _two_machines(tmp_path, bucket)
    url = bucket.url("nightly")
    publish_live(url, together / "a-night02")  # going on again: published as parts
    folder = remote_view.view(url)
    seen = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    with objects_read_whole() as fetched:
        assert remote_view.view(url) == folder
        assert fetched == []
        # a run grows by one part: only that part is fetched, appended to the view's file
        run = "a-night02"
        before = (folder / run / "attempts.jsonl").stat()
        part, grown = _one_part_more(bucket, together / run)
        remote_view.view(url)
        assert fetched == [part]
        after = (folder / run / "attempts.jsonl").stat()
        assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size + len(grown))
    unchanged = [p for p in seen if "a-night02" not in str(p) and p.exists()]
    assert all(p.stat().st_mtime_ns == seen[p] for p in unchanged)


def test_a_first_read_fetches_one_sealed_object_a_run_and_never_a_stale_seal(
    bucket: Bucket, tmp_path: Path
) -> None:
    together = _two_machines(tmp_path, bucket)
    url = bucket.url("nightly")
    with objects_read_whole() as fetched:
        folder = remote_view.view(url)
        # each run pushed whole: its reading set in one object, not manifest + 2 parts
        assert len(fetched) == 6
        assert all("/sealed/" in path for path in fetched), fetched
        for run in together.iterdir():
            for name in ("manifest.json", "attempts.jsonl", "calls.jsonl"):
                if (run / name).is_file():
                    assert (folder / run.name / name).read_bytes() == (run / name).read_bytes()
                else:
                    assert not (folder / run.name / name).exists()
        # the run goes on after its seal: the seal no longer matches, its parts are read
        run = "a-night02"
        publish_live(url, together / run)
        part, grown = _one_part_more(bucket, together / run)
        shutil.rmtree(remote_view.view_folder(url))
        fetched.clear()
        folder = remote_view.view(url)
    grown_run = [path for path in fetched if f"/{run}/" in path]
    assert part in grown_run and not any("/sealed/" in path for path in grown_run)
    listed = store.list_runs(bucket.fs, f"{bucket.name}/nightly")[run]
    assert len(grown_run) == 1 + sum(len(parts) for parts in listed.parts.values())
    assert (folder / run / "attempts.jsonl").read_bytes() == (
        together / run / "attempts.jsonl"
    ).read_bytes() + grown.encode()
    assert sum("/sealed/" in path for path in fetched) == 5


def test_objects_changing_under_a_read(bucket: Bucket, tmp_path: Path) -> None:
    together = _two_machines(tmp_path, bucket)
    url = bucket.url("nightly")
    root = f"{bucket.name}/nightly"
    for run_dir in together.iterdir():  # going on again: published as parts
        publish_live(url, run_dir)
    for run in store.list_runs(bucket.fs, root).values():
        # read from their parts (as a live run is): a sealed copy is a snapshot as listed
        for sealed in run.sealed:
            bucket.fs.rm_file(sealed)
    stale = store.list_runs(bucket.fs, root)  # a listing taken before the writes below
    manifest = f"{root}/a-night00/manifest.json"
    changed = json.loads(bucket.fs.cat_file(manifest))
    changed["model"] = "gpt-5-replaced"
    bucket.fs.pipe_file(manifest, json.dumps(changed).encode())
    gone = stale["b-night00"].parts["attempts.jsonl"][0][1].path
    first = bucket.fs.cat_file(gone).splitlines(keepends=True)
    rows = b"".join(first[:-1])  # the part written again, one line shorter, under the read
    bucket.fs.rm_file(gone)
    bucket.fs.pipe_file(gone, rows)
    listings = iter([stale])
    real = store.list_runs

    listed_times = 0

    def first_stale(fs: object, where: str) -> dict[str, store.StoredRun]:
        nonlocal listed_times
        listed_times += 1
        return next(listings, None) or real(fs, where)

    store.list_runs = first_stale  # type: ignore[assignment]
    try:
        folder = remote_view.view(url)
    finally:
        store.list_runs = real  # type: ignore[assignment]
    assert json.loads((folder / "a-night00" / "manifest.json").read_text())["model"] == (
        "gpt-5-replaced"
    )
    assert (folder / "b-night00" / "attempts.jsonl").read_bytes() == rows
    assert listed_times == 2  # the stale listing, then one more after the change was seen


def test_a_missing_bucket_and_a_refusing_store_say_so(bucket: Bucket, monkeypatch) -> None:
    result = driftdesk("trend", "s3://no-such-bucket-here/nightly")
    assert result.returncode == 2
    assert "no bucket 'no-such-bucket-here'" in result.stderr and "Traceback" not in result.stderr
    empty = driftdesk("report", bucket.url("nothing-here"))
    assert empty.returncode == 2 and "Traceback" not in empty.stderr


def test_a_prefix_with_thousands_of_runs(bucket: Bucket, tmp_path: Path) -> None:
    template = history(tmp_path / "one", "t", 1)[0]
    manifest = json.loads((template / "manifest.json").read_text())
    rows = (template / "attempts.jsonl").read_bytes()
    objects = {}
    count = 2000
    for n in range(count):
        run_id = f"run-{n:05d}"
        started = f"2026-{1 + n // 28 % 12:02d}-{1 + n % 28:02d}T{n % 24:02d}:00:00Z"
        objects[f"{bucket.name}/many/{run_id}/manifest.json"] = json.dumps(
            {**manifest, "run_id": run_id, "started_at": started}
        ).encode()
        objects[f"{bucket.name}/many/{run_id}/attempts.jsonl.parts/{store.part_name(0)}"] = rows
    bucket.fs.pipe(objects)
    result = driftdesk("trend", bucket.url("many"), "--json", "--last", "5", timeout=600)
    trend = json_of(result)
    assert len(trend["runs"]) == 5
    folder = remote_view.view_folder(bucket.url("many"))
    assert len([p for p in folder.iterdir() if p.is_dir()]) == count


@pytest.fixture
def refusing_store(home: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """moto's standalone server (its own process) checking credentials: ours are unknown to
    it, so every request is refused as a bucket without permission is."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        yield "s3://team/nightly"
    finally:
        server.terminate()
        server.wait(10)


def test_a_store_that_refuses_says_so_in_one_line(refusing_store: str, tmp_path: Path) -> None:
    run = history(tmp_path / "runs", "a", 1)[0]
    for args, code in (
        (("trend", refusing_store), 2),
        (("report", f"{refusing_store}/{run.name}"), 2),
        (("push", str(run), refusing_store), 1),
        (("pull", f"{refusing_store}/{run.name}"), 1),
        (("run", "--profile", "p", "--suite", "basic", "--out", refusing_store), 2),
    ):
        result = driftdesk(*args)
        assert result.returncode == code, (args, result.stderr)
        assert "refused" in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr and SECRET not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not list(Path(os.environ["XDG_DATA_HOME"]).glob("driftdesk/staging/*"))  # no run


def test_a_run_held_by_another_machines_lock_is_refused_unless_taken_over(
    bucket: Bucket, tmp_path: Path
) -> None:
    run = history(tmp_path / "runs", "a", 1)[0]
    run_path = f"{bucket.name}/nightly/{run.name}"
    store.take_lock(bucket.fs, run_path, "a-machine-that-is-gone")
    refused = driftdesk("push", str(run), bucket.url("nightly"))
    assert refused.returncode == 1 and "two machines never resume one run" in refused.stderr
    assert not bucket.objects(f"nightly/{run.name}/attempts.jsonl.parts")
    taken = driftdesk("push", str(run), bucket.url("nightly"), "--take-over")
    assert taken.returncode == 0, taken.stderr
    published = store.list_runs(bucket.fs, f"{bucket.name}/nightly")[run.name]
    assert published.lock is None and published.sealed_reading_set() is not None
    assert not published.parts  # dropped once sealed: the seal holds the rows


def _without_run_dirs(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_run_dirs(v) for k, v in value.items() if k != "run_dir"}
    if isinstance(value, list):
        return [_without_run_dirs(v) for v in value]
    return value


def test_a_store_with_an_fsspec_configuration_goes_through_s3fs_the_same(
    bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsspec configuration for s3 (settings of its own for s3fs) makes driftdesk read and
    write through s3fs, not botocore's own client: the same lock, layout and figures."""
    monkeypatch.setenv("FSSPEC_S3", json.dumps({"skip_instance_cache": True}))
    client = subprocess.run(
        [sys.executable, "-c", "from driftdesk.rundir import store; "
         f"print(type(store.client({bucket.url()!r})).__name__)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert client.stdout.strip() == "S3FileSystem"
    runs = history(tmp_path / "runs", "a", 3)
    store.take_lock(bucket.fs, f"{bucket.name}/nightly/{runs[0].name}", "a-machine-that-is-gone")
    refused = driftdesk("push", str(runs[0]), bucket.url("nightly"))
    assert refused.returncode == 1 and "two machines never resume one run" in refused.stderr
    pushed = driftdesk("push", *map(str, runs), bucket.url("nightly"), "--take-over")
    assert pushed.returncode == 0, pushed.stderr
    listed = store.list_runs(bucket.fs, f"{bucket.name}/nightly")
    assert all(run.lock is None and run.sealed_reading_set() for run in listed.values())
    remote = json_of(driftdesk("trend", bucket.url("nightly"), "--json"))
    local = json_of(driftdesk("trend", str(tmp_path / "runs"), "--json"))
    assert len(remote["runs"]) == 3
    assert _without_run_dirs(remote) == _without_run_dirs(local)
