"""Benchmark: `driftdesk import JOBS_DIR` of a folder of Harbor jobs, 2,000 trials with their ATIF
trajectories (issue 49), against the floor of reading every trial's result.json.

Side by side, interleaved rounds, each a fresh process:

- ``floor``: Python reading and parsing every trial's ``result.json`` (what any importer must);
- ``driftdesk import`` (the default): the runs, attribution and Harbor's figures; the
  trajectories stay in the jobs and are read when a task is opened;
- ``driftdesk import --copy``: the same, and every trial's trajectory read, redacted and
  written into the run dirs (for comparison; not a target);
- ``open one task``: ``explain`` of one task (its trials' trajectories read then).

Targets: the default import ≤ 10 s and ≤ 512 MiB peak RSS; no trajectory file opened at import
(checked once with an audit hook counting opens). The jobs live in a temporary folder, deleted
at the end.

    .venv-test/bin/python tests/benchmarks/bench_harbor_import.py [--trials 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "analysis"))
from benchlib import interleave, load, private_home, table, timed_child, verdict  # noqa: E402
from harbor_fixtures import Trial, write_job  # noqa: E402

FLOOR = r"""
import json, sys
from pathlib import Path
n = 0
for job in Path(sys.argv[1]).iterdir():
    for result in job.glob("*/result.json"):
        json.loads(result.read_bytes()); n += 1
print(n)
"""
# The import under an audit hook: how many trajectory files it opened (should be none).
AUDITED = r"""
import sys
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and "trajectory" in args[0]:
        opened.append(args[0])
sys.addaudithook(hook)
from driftdesk.cli.main import main
code = main(sys.argv[1:])
print(f"trajectory files opened: {len(opened)}", file=sys.stderr)
sys.exit(1 if opened else code)
"""
JOBS = 10
COMMANDS = 14  # per trial: 2 + 2 x 14 steps in its ATIF trajectory


def build(root: Path, trials: int) -> int:
    per_job = trials // JOBS
    tasks = per_job // 2
    size = 0
    for j in range(JOBS):
        job_trials = [
            Trial(
                f"task-{t:03d}-with-a-longish-terminal-bench-name",
                float((t + j + a) % 3 == 0),
                minute=j * 1000 + t * 2 + a,
                commands=[f"echo step {i} of task {t}" for i in range(COMMANDS)],
            )
            for t in range(tasks)
            for a in range(2)
        ]
        write_job(root, f"2026-11-{j + 1:02d}__02-00-00", job_trials, n_attempts=2, seed=j)
    for path in root.rglob("*.json"):
        size += path.stat().st_size
    return size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    private_home("bench-harbor-")
    work = Path(tempfile.mkdtemp(prefix="bench-harbor-"))
    python = sys.executable
    ok = True
    try:
        jobs = work / "jobs"
        size = build(jobs, args.trials)
        print(f"{args.trials} trials in {JOBS} jobs, {size / 2**20:.1f} MiB of JSON ({load()})")
        counter = {"n": 0}

        def import_run(*extra: str) -> object:
            counter["n"] += 1
            out = work / f"runs-{counter['n']}"
            sample = timed_child(
                [python, "-m", "driftdesk", "import", str(jobs), "--out", str(out), *extra]
            )
            shutil.rmtree(out, ignore_errors=True)
            return sample

        explain_runs = work / "explain-runs"
        subprocess.run(
            [python, "-m", "driftdesk", "import", str(jobs), "--out", str(explain_runs)],
            check=True,
            capture_output=True,
        )
        one_run = sorted(explain_runs.iterdir())[0]
        task = "task-000-with-a-longish-terminal-bench-name"
        runners = {
            "floor (parse every result)": lambda: timed_child([python, "-c", FLOOR, str(jobs)]),
            "driftdesk import": lambda: import_run(),
            "driftdesk import --copy": lambda: import_run("--copy"),
            "open one task (explain)": lambda: timed_child(
                [python, "-m", "driftdesk", "explain", str(one_run), task]
            ),
        }
        results = interleave(runners, args.rounds)  # type: ignore[arg-type]
        table(results)
        default = results["driftdesk import"]
        floor = results["floor (parse every result)"]
        print(
            f"import / floor: {default.wall / floor.wall:.2f}×  (--copy "
            f"{results['driftdesk import --copy'].wall / floor.wall:.2f}×)"
        )
        ok &= verdict("import of the jobs (median wall)", default.wall, 10, " s")
        ok &= verdict("import peak RSS", default.peak_rss / 2**20, 512, " MiB")
        audited = subprocess.run(
            [python, "-c", AUDITED, "import", str(jobs), "--out", str(work / "audited")],
            capture_output=True,
            text=True,
        )
        print(audited.stderr.strip().splitlines()[-1])
        ok &= audited.returncode == 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
