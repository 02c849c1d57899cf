"""The live state the Run screen draws from, fed by the real engine against the sandbox."""

from __future__ import annotations

from pathlib import Path

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.engine import RunSpec, execute_run
from driftdesk.reruns.events import RunEvent
from driftdesk.reruns.sandbox import SIM_MODEL, SandboxServer
from driftdesk.tui.state import LiveRun


class RecordingLiveRun(LiveRun):
    """A LiveRun that remembers its running count after every event."""

    def __init__(self) -> None:
        super().__init__(label="state test")
        self.running_seen: list[int] = []

    def on_event(self, event: RunEvent) -> None:
        super().on_event(event)
        self.running_seen.append(self.running)


async def test_running_count_never_exceeds_the_concurrency(tmp_path: Path) -> None:
    live = RecordingLiveRun()
    with SandboxServer(seed=3, latency_ms=5.0) as server:
        outcome = await execute_run(
            RunSpec(
                profile=Profile("sim", "openai", server.base_url, SIM_MODEL),
                suite="basic",
                repeat=2,
                concurrency=2,
                timeout_s=30,
                out_dir=tmp_path,
                api_key="throwaway-sandbox-key",
            ),
            live,
        )
    assert outcome.status == "completed"
    assert live.done == live.total == outcome.stats.total
    assert max(live.running_seen) == 2  # both slots were busy at some point, never more
    assert live.running == 0
