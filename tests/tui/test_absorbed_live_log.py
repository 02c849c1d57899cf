"""The Run screen's live log of an attempt says when a call's fault was absorbed at the proxy
(``--link-faults absorb``): the agent never saw it, the call was sent again after the wait."""

from __future__ import annotations

from driftdesk.reruns.events import AttemptStarted, CallRecorded
from driftdesk.tui.state import LiveRun


def test_an_absorbed_call_says_so_in_the_live_log() -> None:
    live = LiveRun("run")
    live.on_event(AttemptStarted("r", "t", 0))
    held = {"call_index": 0, "method": "POST", "path": "/v1/chat/completions", "status": 429,
            "error_kind": "429", "latency_ms": 3.0, "total_tokens": None, "absorbed": True,
            "wait_s": 2.1}  # fmt: skip
    answered = held | {"call_index": 1, "status": 200, "error_kind": None, "absorbed": False,
                       "wait_s": None, "total_tokens": 14}  # fmt: skip
    live.on_event(CallRecorded("r", "t", 0, held))
    live.on_event(CallRecorded("r", "t", 0, answered))
    lines, _ = live.new_log_lines(("t", 0), 0)
    assert lines[0].endswith("→ 429 3 ms, 0 tokens, absorbed (waiting 2.1s)")
    assert lines[1].endswith("→ 200 3 ms, 14 tokens")
