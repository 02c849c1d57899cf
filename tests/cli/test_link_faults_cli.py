"""``--link-faults`` at the command line: ``profile add/edit --link-faults`` stores the setting,
``run`` follows the flag, else the profile, else the agent kind's default, records it in the
manifest and ``report`` says what was absorbed; a bad mode is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from driftdesk.providers.profiles import ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer


def _run_dir(out: Path) -> Path:
    [run_dir] = [p for p in out.iterdir() if (p / "manifest.json").is_file()]
    return run_dir


def test_the_flag_the_profile_and_the_report(home: Any, cli: Any, tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        added = cli(
            "profile", "add", "sim", "--protocol", "openai", "--base-url", server.base_url,
            "--model", SIM_MODEL, "--no-key", "--link-faults", "absorb", input="",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert ProfileStore().get("sim").link_faults == "absorb"
        assert 'link_faults = "absorb"' in ProfileStore().path.read_text()
        out = tmp_path / "runs"
        ran = cli(
            "run", "--profile", "sim", "--suite", "basic", "--repeat", "2", "--no-probe",
            "--inject", "429=40%:0.01s", "--seed", "3", "--out", str(out), timeout=120,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        run_dir = _run_dir(out)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["link_faults"] == "absorb"  # the profile's, over builtin's retry
        assert "absorbed at the proxy" in ran.stdout  # the injected faults' line says it
        report = cli("report", str(run_dir))
        assert report.returncode == 0, report.stderr
        assert "link faults: absorb:" in report.stdout
        assert "0 surfaced as link errors" in report.stdout
        data = json.loads(cli("report", str(run_dir), "--format", "json").stdout)
        runs = data if isinstance(data, list) else data.get("runs", [data])
        assert runs[0]["link_faults"]["absorbed"] > 0

        # The flag wins over the profile; "none" clears the profile's setting.
        assert cli("profile", "edit", "sim", "--link-faults", "none").returncode == 0
        assert ProfileStore().get("sim").link_faults is None
        out2 = tmp_path / "runs2"
        ran = cli(
            "run", "--profile", "sim", "--suite", "basic", "--repeat", "1", "--no-probe",
            "--link-faults", "absorb", "--out", str(out2), timeout=120,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        manifest = json.loads((_run_dir(out2) / "manifest.json").read_text())
        assert manifest["link_faults"] == "absorb"


def test_a_bad_mode_is_one_line_and_exit_2(home: Any, cli: Any) -> None:
    done = cli("run", "--profile", "nobody", "--suite", "basic", "--link-faults", "sometimes")
    assert done.returncode == 2
    assert "--link-faults" in done.stderr and "sometimes" in done.stderr
    edit = cli("profile", "edit", "nobody", "--link-faults", "often")
    assert edit.returncode == 2 and "--link-faults" in edit.stderr


def test_kill_9_during_a_hold_then_resume_loses_and_doubles_nothing(
    home: Any, cli: Any, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from driftdesk.fileio import iter_jsonl

    with SandboxServer(seed=3) as server:
        added = cli(
            "profile", "add", "sim", "--protocol", "openai", "--base-url", server.base_url,
            "--model", SIM_MODEL, "--no-key", input="",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        out = tmp_path / "runs"
        run = subprocess.Popen(
            [
                sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite",
                "basic", "--repeat", "3", "--concurrency", "4", "--no-probe", "--seed", "5",
                "--inject", "429=30%:3s", "--link-faults", "absorb", "--out", str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            held = False
            for _ in range(300):  # a row of a fault being held (its 3 s wait under way)
                calls = out.glob("*/calls.jsonl")
                held = any('"absorbed":true' in p.read_text().replace(" ", "") for p in calls)
                if held:
                    break
                time.sleep(0.05)
            assert held
            os.kill(run.pid, signal.SIGKILL)
        finally:
            run.wait(10)
        run_dir = _run_dir(out)
        problems: list[Any] = []
        rows_before = [row for _, row in iter_jsonl(run_dir / "attempts.jsonl", problems)]
        assert not problems
        resumed = cli("resume", str(run_dir), "--no-probe", timeout=120)
        assert resumed.returncode == 0, resumed.stderr
    rows = [row for _, row in iter_jsonl(run_dir / "attempts.jsonl", problems)]
    calls = [row for _, row in iter_jsonl(run_dir / "calls.jsonl", problems)]
    assert not problems
    slots = [(r["task_id"], r["attempt"]) for r in rows]
    assert len(slots) == len(set(slots))  # nothing doubled
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert len(slots) == len(manifest["tasks"]) * 3  # nothing lost
    assert len(rows) > len(rows_before)
    assert all(r["outcome"] in ("pass", "fail") for r in rows)
    assert manifest["link_faults"] == "absorb" and manifest["status"] == "completed"
    assert any(c["absorbed"] for c in calls)
