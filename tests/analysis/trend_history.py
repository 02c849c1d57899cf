"""The nightly history of ``driftdesk demo --history``, made for real: each night a real run
through the metering proxy against a fresh sandbox with its own seed (``reruns.demo``).

Night 3 is answered under another model name (a gateway routing the asked name elsewhere),
which stays; night 5 has five tasks the model always got right fail every time; night 6 reruns
night 5's setup unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from driftdesk.reruns.demo_history import HISTORY_FOLDER, HISTORY_NIGHTS, HISTORY_ROUTED_MODEL

ROUTED = HISTORY_ROUTED_MODEL
SERVED_CHANGE, REGRESSION, UNCHANGED = 2, 4, 5  # indexes into the nights


def make_history(out: Path) -> tuple[list[Path], frozenset[str], str]:
    """``driftdesk demo --history --out OUT`` in a subprocess: the run dirs (oldest first),
    the five tasks made to fail, and what the command printed."""
    from driftdesk.reruns.simulated_endpoint import SandboxEndpoint

    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "demo", "--history", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    folder = out / HISTORY_FOLDER
    runs = sorted(
        (p for p in folder.iterdir() if (p / "manifest.json").is_file()),
        key=lambda p: json.loads((p / "manifest.json").read_text())["started_at"],
    )
    assert len(runs) == len(HISTORY_NIGHTS)
    shifted = SandboxEndpoint(**HISTORY_NIGHTS[REGRESSION]).shifted
    assert shifted is not None
    return runs, shifted, done.stdout


def set_started(run_dir: Path, started_at: str) -> None:
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["started_at"] = started_at
    path.write_text(json.dumps(manifest))
