"""Benchmark: runs in object storage (issue 51) against the same runs on the local disk.

The S3 API is moto's standalone server on loopback (its own process), reached by s3fs through
botocore's chain (``AWS_ENDPOINT_URL``). Measured side by side in interleaved rounds, each a
child process (wall, CPU, peak RSS):

- ``trend`` over a history (default 200 runs × 1,000 attempts: 5× fewer attempts a run than
  the issue's 5,000, so the bucket fits moto's memory on a shared machine; ``--tasks 500``
  gives the issue's size): first time (every cache and the bucket's local view deleted) on
  disk and in the bucket; then unchanged (caches and view kept);
- ``report`` of one big run (default 200,000 rows; ``--report-rows 1000000`` is the issue's),
  cold on disk and cold from the bucket;
- ``run`` against the sandbox at concurrency 32 to a local folder and to ``s3://``
  (published as it goes and at its end).

    .venv-test/bin/python tests/benchmarks/bench_object_store.py [--runs 200] [--tasks 100]
        [--repeat 10] [--report-rows 200000] [--run-repeat 10] [--rounds 3]

Targets (issue #51): trend first time in a bucket ≤ 3× the local first time; unchanged ≤ the
local unchanged + 0.5 s; report cold from a bucket ≤ 2× the local cold; publishing adds ≤ 5 %
to a run's wall time. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trend import make_history
from benchlib import drop_caches, interleave, load, private_home, table, timed_child, verdict

CLI = "from driftdesk.cli.main import main; raise SystemExit(main({argv!r}))"


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="AKIABENCH",
        AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return server, endpoint


def cli(*argv: str) -> list[str]:
    return [sys.executable, "-c", CLI.format(argv=list(argv))]


def push(folder: Path, url: str) -> float:
    started = time.perf_counter()
    subprocess.run(cli("push", str(folder), url), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def big_run(root: Path, rows: int) -> Path:
    run_dir = root / "big-run"
    run_dir.mkdir(parents=True)
    tasks = max(1, rows // 100)
    manifest = {
        "run_id": "big-run", "profile": "bench", "model": "m", "status": "completed",
        "suite": {"name": "bench", "path": None, "sha256": "0" * 64}, "repeat": 100,
        "tasks": [f"task-{t:05d}" for t in range(tasks)], "started_at": "2026-12-01T00:00:00Z",
    }  # fmt: skip
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    rng = random.Random(51)
    with open(run_dir / "attempts.jsonl", "w") as out:
        for n in range(rows):
            t, attempt = divmod(n, 100)
            row = {
                "run_id": "big-run", "task_id": f"task-{t:05d}", "attempt": attempt,
                "outcome": "pass" if rng.random() < 0.7 else "fail", "total_tokens": 900,
                "prompt_tokens": 800, "completion_tokens": 100,
                "latency_ms": 1000.0 + rng.random() * 500, "model": "m",
            }  # fmt: skip
            out.write(json.dumps(row) + "\n")
    return run_dir


def trend_bench(root: Path, args: argparse.Namespace, bucket: str) -> bool:
    started = time.perf_counter()
    folder = make_history(root, args.runs, args.tasks, args.repeat)
    made = time.perf_counter() - started
    pushed = push(folder, f"{bucket}/history")
    print(
        f"{args.runs} runs × {args.tasks * args.repeat} attempts written in {made:.1f} s, "
        f"pushed in {pushed:.1f} s ({load()})"
    )
    runs = sorted(folder.iterdir())
    local = cli("trend", str(folder), "--json")
    remote = cli("trend", f"{bucket}/history", "--json")

    def cold(argv: list[str]):  # type: ignore[no-untyped-def]
        drop_caches(*runs)  # the runs' row caches and the user's cache dir (views too)
        return timed_child(argv)

    contenders = interleave(
        {
            "trend on disk, first time": lambda: cold(local),
            "trend on disk, unchanged": lambda: timed_child(local),
            "trend in bucket, first time": lambda: cold(remote),
            "trend in bucket, unchanged": lambda: timed_child(remote),
        },
        args.rounds,
    )
    table(contenders)
    local_first = contenders["trend on disk, first time"].wall
    local_warm = contenders["trend on disk, unchanged"].wall
    remote_first = contenders["trend in bucket, first time"].wall
    remote_warm = contenders["trend in bucket, unchanged"].wall
    print(
        f"\ntrend first time, bucket / disk: {remote_first / local_first:.2f}×;  "
        f"unchanged, bucket - disk: {remote_warm - local_warm:+.3f} s"
    )
    ok = verdict("trend first time, bucket / disk", remote_first / local_first, 3.0)
    ok &= verdict("trend unchanged, bucket - disk", remote_warm - local_warm, 0.5, " s")
    return ok


def report_bench(root: Path, args: argparse.Namespace, bucket: str) -> bool:
    run_dir = big_run(root / "big", args.report_rows)
    size = (run_dir / "attempts.jsonl").stat().st_size
    pushed = push(run_dir, f"{bucket}/big")
    print(f"\none run of {args.report_rows:,} rows ({size / 2**20:.0f} MiB), pushed in "
          f"{pushed:.1f} s ({load()})")  # fmt: skip
    local = cli("report", str(run_dir), "--format", "json")
    remote = cli("report", f"{bucket}/big/big-run", "--format", "json")

    def cold(argv: list[str]):  # type: ignore[no-untyped-def]
        drop_caches(run_dir)
        return timed_child(argv)

    contenders = interleave(
        {
            "report on disk, cold": lambda: cold(local),
            "report in bucket, cold": lambda: cold(remote),
        },
        args.rounds,
    )
    table(contenders)
    ratio = contenders["report in bucket, cold"].wall / contenders["report on disk, cold"].wall
    print(f"\nreport cold, bucket / disk: {ratio:.2f}×")
    return verdict("report cold, bucket / disk", ratio, 2.0)


def publish_bench(root: Path, args: argparse.Namespace, bucket: str) -> bool:
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    server = SandboxServer(seed=7, latency_ms=200)
    server.start()
    try:
        ProfileStore().save(Profile("sim", "openai", server.base_url, SIM_MODEL, no_key=True))
        base = ["run", "--profile", "sim", "--suite", "basic", "--repeat", str(args.run_repeat),
                "--concurrency", "32", "--no-probe"]  # fmt: skip
        counter = iter(range(10_000))

        def to_disk():  # type: ignore[no-untyped-def]
            return timed_child(cli(*base, "--out", str(root / f"local-{next(counter)}")))

        def to_bucket():  # type: ignore[no-untyped-def]
            return timed_child(cli(*base, "--out", f"{bucket}/published-{next(counter)}"))

        print(f"\nrun: basic suite (34 tasks) × {args.run_repeat} at concurrency 32, the "
              f"sandbox at 200 ms a call ({load()})")  # fmt: skip
        contenders = interleave(
            {"run to a local folder": to_disk, "run to s3:// (published)": to_bucket},
            args.rounds,
        )
    finally:
        server.stop()
    table(contenders)
    local = contenders["run to a local folder"].wall
    remote = contenders["run to s3:// (published)"].wall
    added = (remote - local) / local * 100
    print(f"\npublishing adds {added:+.1f} % to the run's wall time")
    return verdict("publishing's added wall time", added, 5.0, " %")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--report-rows", type=int, default=1_000_000)
    parser.add_argument("--run-repeat", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["trend", "report", "publish"])
    args = parser.parse_args()
    private_home("driftdesk-bench-store-")
    root = Path(tempfile.mkdtemp(prefix="driftdesk-bench-store-runs-"))
    server, _ = start_moto()
    try:
        import s3fs

        s3fs.S3FileSystem().mkdir("bench")
        ok = True
        if args.only in (None, "trend"):
            ok &= trend_bench(root, args, "s3://bench")
        if args.only in (None, "report"):
            ok &= report_bench(root, args, "s3://bench")
        if args.only in (None, "publish"):
            ok &= publish_bench(root, args, "s3://bench")
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
