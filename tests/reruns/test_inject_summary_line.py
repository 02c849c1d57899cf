"""The last lines of ``driftdesk run --inject``: the faults line names the spec the run injected
(it said ``injected faults (?): 22``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

KEY = "sk-test-REALKEY-injectline-0123456789"


@pytest.mark.keyring
def test_the_runs_faults_line_names_its_inject_spec(home: Any, cli: Any, tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        ProfileStore().save(
            Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
        )
        set_key("sim", KEY)
        out = tmp_path / "runs"
        done = cli(
            "run", "--profile", "sim", "--suite", "basic", "--repeat", "2", "--timeout", "10",
            "--out", str(out), "--inject", "429=30%:0.01s", timeout=180,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [run_dir] = [p for p in out.iterdir() if (p / "manifest.json").is_file()]
    spec = json.loads((run_dir / "manifest.json").read_text())["injection"]["spec"]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("injected faults")]
    assert line.startswith(f"injected faults ({spec}): "), line
    assert "(?)" not in done.stdout
