"""A run launched from the workbench's form onto a real Ray cluster (two nodes on loopback): the
form's "Where attempts run" choice reaches the run, the live pane names the nodes, and a bad
address is refused in the form, saying what to type."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator

import pytest

from driftdesk.tui.screens.run import RunScreen, _counters
from tests.reruns.ray_helpers import LoopbackCluster, loopback_cluster, write_suite

# Each test skips (counted by tests/conftest.py as a missing Ray), rather than the module.
RAY_MISSING = importlib.util.find_spec("ray") is None
if RAY_MISSING and os.environ.get("CI"):  # CI installs the extra (./run tests): a failure
    raise ImportError("ray is not installed")
pytestmark = [
    pytest.mark.skipif(
        RAY_MISSING, reason="ray is not installed: run ./run tests (it installs driftdesk[ray])"
    ),
    pytest.mark.xdist_group("ray"),
    pytest.mark.timeout(600),
]

SIZE = (140, 42)
KEY = "sk-test-REALKEY-tui-ray-0123456789abcdef"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    with loopback_cluster(nodes=2, dashboard=True) as running:
        yield running


@pytest.mark.keyring
async def test_a_run_launched_on_ray_from_the_form(
    cluster: LoopbackCluster, home, make_app, open_launch_form, wait_for_run, tmp_path
) -> None:
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    suite = write_suite(tmp_path / "suite")
    with SandboxServer(seed=5, suites=[str(suite)]) as sandbox:
        ProfileStore().save(
            Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
        )
        set_key("sim", KEY)
        app = make_app(start_mode="run")
        async with app.run_test(size=SIZE) as pilot:
            form = await open_launch_form(
                app, pilot, profile="sim", suite=str(suite), repeat="2", concurrency="2",
                timeout="60", executor="ray", **{"ray-address": "somewhere"},
            )  # fmt: skip
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.screen is form  # refused in the form
            error = str(form.query_one("#form-error").render())
            assert "Ray address 'somewhere': use auto, ray://HOST:PORT or HOST:PORT" in error
            form.query_one("#ray-address").value = cluster.address  # type: ignore[attr-defined]
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert isinstance(app.screen, RunScreen)
            live = app.screen.live
            assert live is not None
            await wait_for_run(app, pilot, live)
            assert live.status == "completed", live.status
            assert live.done == 10
            counters = _counters(live).plain
            assert "dashboard http://127.0.0.1:" in counters
    manifest = json.loads((live.run_dir / "manifest.json").read_text())
    assert manifest["executor"] == {
        "kind": "ray",
        "ray_address": cluster.address,
        "ray_resources": {},
    }
    rows = [json.loads(line) for line in (live.run_dir / "attempts.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and all(r["node"].startswith("127.0.0.1/") for r in rows)
    assert KEY not in (live.run_dir / "manifest.json").read_text()
