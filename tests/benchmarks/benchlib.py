"""What every benchmark here shares: child processes timed with their CPU and peak memory,
interleaved rounds, and one line per figure with its ratio against the floor and the load.

The machine the figures come from may be shared, so each benchmark runs its contenders in
turns (round 1: A B C, round 2: A B C, ...), reports medians, and prints the load average
beside every ratio: a figure is only as good as the quiet it was measured in.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    peak_rss: int  # bytes


@dataclass
class Contender:
    name: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(s.wall_s for s in self.samples)

    @property
    def cpu(self) -> float:
        return statistics.median(s.cpu_s for s in self.samples)

    @property
    def peak_rss(self) -> int:
        return max(s.peak_rss for s in self.samples)


# Where driftdesk finds the user's files besides HOME (``driftdesk.paths``).
USER_PLACES = (
    "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
    "DRIFTDESK_CONFIG_DIR", "DRIFTDESK_DATA_DIR",
)  # fmt: skip


def private_home(prefix: str) -> Path:
    """Point this process (and its children) at a new, empty home, so driftdesk reads and
    writes nothing of the user's (profiles, the store of measured successes, locks)."""
    import tempfile

    home = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["HOME"] = str(home)
    for name in USER_PLACES:
        os.environ.pop(name, None)
    return home


def drop_caches(*run_dirs: Path) -> None:
    """Delete every cache of derived data a report or a trend keeps, as ``driftdesk cache
    clear`` finds them (each run's own entries of every declared cache: its row cache, its
    trend aggregate beside it; and the user's cache dir: kept reports, trends, the caches of
    read-only runs, the views of runs in a bucket), so that the next read is cold. The
    benchmarks time cold reads: a kept report takes 0.15 s."""
    import shutil

    from driftdesk.analysis import cache_places
    from driftdesk.paths import cache_dir

    failed = cache_places.clear(cache_places.of_runs(run_dirs)).failed
    assert not failed, f"caches not cleared: {failed}"
    shutil.rmtree(cache_dir(), ignore_errors=True)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} on {os.cpu_count()} cores"


def timed_child(
    argv: Sequence[str], *, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> Sample:
    """Wall seconds, CPU seconds (user + system, children included) and peak RSS of one child
    process; stdout is discarded, a non-zero exit stops the benchmark with its stderr."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(
            list(argv),
            stdout=devnull,
            stderr=subprocess.PIPE,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            env=env,
        )
        if stdin is not None and proc.stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()
        stderr = proc.stderr.read() if proc.stderr else b""
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if proc.stderr:
        proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:5])} failed:\n{stderr.decode(errors='replace')}")
    return Sample(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)  # KiB


def interleave(
    runners: dict[str, Callable[[], Sample]], rounds: int, *, quiet: bool = False
) -> dict[str, Contender]:
    """Run every contender once per round, in turns, ``rounds`` times."""
    contenders = {name: Contender(name) for name in runners}
    for round_ in range(rounds):
        for name, run in runners.items():
            sample = run()
            contenders[name].samples.append(sample)
            if not quiet:
                print(
                    f"  round {round_ + 1}: {name:<28} {sample.wall_s:8.3f} s  "
                    f"cpu {sample.cpu_s:7.3f} s  peak {sample.peak_rss / 2**20:7.0f} MiB  "
                    f"({load()})",
                    flush=True,
                )
    return contenders


def table(contenders: dict[str, Contender]) -> None:
    print(f"\n{'':30}{'median s':>10}{'CPU s':>9}{'peak RSS':>12}   rounds (s)")
    for c in contenders.values():
        rounds = " ".join(f"{s.wall_s:.3f}" for s in c.samples)
        print(f"{c.name:30}{c.wall:>10.3f}{c.cpu:>9.3f}{c.peak_rss / 2**20:>8.0f} MiB   {rounds}")


def verdict(label: str, value: float, target: float, unit: str = "×") -> bool:
    ok = value <= target
    print(
        f"{label}: {value:.3f}{unit} (target ≤ {target:g}{unit}) {'OK' if ok else 'MISSED'}"
        f"   [{load()}]"
    )
    return ok


PRIVATE_KEYRING = "DRIFTDESK_BENCH_PRIVATE_KEYRING"


def rerun_in_private_keyring(script: str, argv: Sequence[str]) -> int | None:
    """Run ``script`` again inside a private, throwaway D-Bus session and unlocked keyring
    (``tests/with-keyring.sh``) and return its exit code; None when already inside one. A
    benchmark never touches the user's own keyring."""
    if os.environ.get(PRIVATE_KEYRING) == "1":
        return None
    if not shutil.which("dbus-run-session"):
        print("needs dbus-run-session and gnome-keyring (./run tests installs them)")
        return 1
    with_keyring = Path(__file__).resolve().parents[1] / "with-keyring.sh"
    env = dict(os.environ, **{PRIVATE_KEYRING: "1"})
    command = ["dbus-run-session", "--", "bash", str(with_keyring), sys.executable, script]
    return subprocess.call([*command, *argv], env=env)
