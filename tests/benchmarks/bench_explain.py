"""Benchmark: ``explain`` of one task with 50 attempts of 40 model turns each, every attempt
after one abandoned try of 20 turns (target: explain_task ≤ 0.2 s, the command ≤ 1 s).

The run is written as the proxy writes it (``tests/analysis/recording_fixtures``): one gzip
member per call in each attempt's recording, a calls.jsonl row per call (a 429 before some
turns), an attempts row per slot; half the attempts pass, half fail, the fails parting from
the passes at turn 20. Before its final try each attempt made one try of 20 turns that a 429
cut (``--abandoned-turns``, 0: none): it is read and kept apart, never compared. Measured side
by side in interleaved rounds, in this process:

- ``read the files``: the floor: every recording decompressed and each record parsed, the
  task's calls.jsonl and attempts.jsonl rows parsed (no steps, no comparison);
- ``explain_task``: the whole explanation (trajectories, actions, 625 pass/fail pairs,
  step differences, link events, figures);

and the command a person types, ``driftdesk explain RUN TASK --json``, as a child process
(interpreter start included). Not part of the test suite.

    .venv/bin/python tests/benchmarks/bench_explain.py [--attempts 50] [--turns 40]
        [--abandoned-turns 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "analysis"))
from benchlib import load, timed_child, verdict
from recording_fixtures import write_manifest, write_slot

TASK = "retail-42"
TARGET_S = 0.2  # explain_task
COMMAND_TARGET_S = 1.0  # the whole command, interpreter start included


def write_run(run: Path, attempts: int, turns: int, abandoned_turns: int = 0) -> None:
    write_manifest(run)
    for attempt in range(attempts):
        passes = attempt % 2 == 0
        script: list[tuple] = []
        for turn in range(turns - 1):
            # the fails look the wrong order up from turn 20 on
            order = f"#W{turn}" if passes or turn < 20 else f"#X{turn}"
            result = json.dumps({"order_id": order, "status": "delivered", "items": ["k"] * 20})
            script.append(("call", "get_order_details", {"order_id": order}, result))
        script.append(("answer", "All your orders were delivered." if passes else "Not found."))
        failures = {turn: [(429, "429")] for turn in (0, 17)} if attempt % 5 == 0 else None
        # An abandoned try: the other group's path, cut by a 429 after ``abandoned_turns``.
        abandoned = [
            ("call", "get_order_details", {"order_id": f"#Z{turn}"}, '{"status": "lost"}')
            for turn in range(abandoned_turns)
        ]
        write_slot(
            run,
            TASK,
            attempt,
            script,
            outcome="pass" if passes else "fail",
            failures=failures,
            earlier=[abandoned] if abandoned else None,
        )


def read_the_files(run: Path) -> int:
    """The floor: the bytes every explanation has to read, decompressed and parsed."""
    records = 0
    for path in (run / "attempts").rglob("*.calls.jsonl.gz"):
        for line in gzip.decompress(path.read_bytes()).splitlines():
            json.loads(line)
            records += 1
    for name in ("calls.jsonl", "attempts.jsonl"):
        for line in (run / name).read_bytes().splitlines():
            json.loads(line)
    return records


def explain(run: Path) -> int:
    from driftdesk.analysis import steps
    from driftdesk.analysis.explain import explain_task

    steps._canonical_text.cache_clear()  # each round as cold as a new process's first
    e = explain_task(run, TASK)
    assert e.pairs and e.differences, "the explanation found nothing"
    # The abandoned tries are read and kept apart: the divergence is the final tries' (turn 20).
    assert {d.step for _, _, d in e.pairs if d is not None} == {20}
    return len(e.pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=50)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--abandoned-turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="driftdesk-bench-explain-") as tmp:
        run = Path(tmp) / "run"
        write_run(run, args.attempts, args.turns, args.abandoned_turns)
        size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        print(
            f"run {run}: {args.attempts} attempts × {args.turns} turns "
            f"(+ an abandoned try of {args.abandoned_turns} turns each), "
            f"{size / 1e6:.1f} MB on disk ({load()})"
        )
        explain(run)  # imports and the page cache warm, for both contenders alike
        times: dict[str, list[float]] = {"read the files": [], "explain_task": []}
        contenders = [("read the files", read_the_files), ("explain_task", explain)]
        for round_ in range(args.rounds):
            for name, call in contenders if round_ % 2 == 0 else contenders[::-1]:
                start = time.perf_counter()
                call(run)
                times[name].append(time.perf_counter() - start)
            print(
                f"  round {round_ + 1}: "
                + ", ".join(f"{n} {times[n][-1]:.3f} s" for n, _ in contenders)
                + f" ({load()})",
                flush=True,
            )
        cli = [
            timed_child([sys.executable, "-m", "driftdesk", "explain", str(run), TASK, "--json"])
            for _ in range(args.rounds)
        ]
        floor = statistics.median(times["read the files"])
        explained = statistics.median(times["explain_task"])
        command = statistics.median(s.wall_s for s in cli)
        print(
            f"\nmedians: read the files {floor:.3f} s, explain_task {explained:.3f} s "
            f"({explained / floor:.2f}× the floor), driftdesk explain --json {command:.3f} s "
            f"(interpreter start included)"
        )
        verdict(
            f"explain_task, {args.attempts} attempts × {args.turns} turns "
            f"+ {args.abandoned_turns} abandoned",
            explained,
            TARGET_S,
            " s",
        )
        verdict("driftdesk explain --json, the whole command", command, COMMAND_TARGET_S, " s")


if __name__ == "__main__":
    main()
