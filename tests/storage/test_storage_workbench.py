"""``driftdesk tui --runs s3://…``: the workbench of a third folder lists two machines' runs
published to one bucket as one history, and a run published after it opened shows up."""

from __future__ import annotations

import time
from pathlib import Path

from storage_helpers import Bucket, driftdesk, history

from driftdesk.cli import storage
from driftdesk.cli.main import build_parser
from driftdesk.tui.app import DriftdeskApp
from driftdesk.tui.widgets.runs_list import RunsList

SIZE = (140, 42)


def _listed(app: DriftdeskApp) -> set[str]:
    options = app.screen.query_one(RunsList)
    return {Path(str(options.get_option_at_index(i).id)).name for i in range(options.option_count)}


async def test_the_workbench_over_a_bucket_lists_both_machines_runs(
    bucket: Bucket, tmp_path: Path, monkeypatch
) -> None:
    for machine in ("a", "b"):
        history(tmp_path / machine, machine, 2)
        pushed = driftdesk("push", str(tmp_path / machine), bucket.url("nightly"))
        assert pushed.returncode == 0, pushed.stderr
    monkeypatch.setattr(storage, "VIEW_REFRESH_S", 0.3)
    argv = ["tui", "--runs", bucket.url("nightly")]
    args = build_parser().parse_args(argv)
    assert storage.place_urls(args, argv) is None
    (view,) = args.runs
    assert isinstance(view, Path) and view.is_dir() and "s3:" not in view.parts
    third = tmp_path / "third"
    third.mkdir()
    app = DriftdeskApp(out_dir=third, runs_dirs=[third, *args.runs], blink=False)
    try:
        await _watch(app, bucket, tmp_path)
    finally:
        storage.stop_refreshing()


async def _watch(app: DriftdeskApp, bucket: Bucket, tmp_path: Path) -> None:
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 30
        want = {"a-night00", "a-night01", "b-night00", "b-night01"}
        while _listed(app) != want:
            assert time.monotonic() < deadline, _listed(app)
            await pilot.pause(0.2)
        # a night published by machine a while the workbench is open: it shows up
        history(tmp_path / "later", "a", 3)
        late = tmp_path / "later" / "a-night02"
        assert driftdesk("push", str(late), bucket.url("nightly")).returncode == 0
        while "a-night02" not in _listed(app):
            assert time.monotonic() < deadline + 30, _listed(app)
            await pilot.pause(0.2)
