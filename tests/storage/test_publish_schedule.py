"""How often a run is published as it goes (``publish.tick_wait``): every second at first, less
often as the run ages, so that a long run leaves hundreds of parts a file, not one a second
(each is an object every listing of the history enumerates), and a teammate never waits more
than ``MAX_INTERVAL_S`` for new rows."""

from __future__ import annotations

from driftdesk.reruns.publish import DEFAULT_INTERVAL_S, MAX_INTERVAL_S, tick_wait


def _ticks(seconds: float) -> list[float]:
    """When a publisher ticks over its first ``seconds``."""
    at, ticks = 0.0, []
    while True:
        at += tick_wait(at)
        if at > seconds:
            return ticks
        ticks.append(at)


def test_a_long_run_leaves_hundreds_of_parts_not_one_a_second() -> None:
    first_minute = _ticks(60)
    assert len(first_minute) >= 55  # a short run is seen live, second by second
    hour = _ticks(3600)
    assert 250 <= len(hour) <= 400, len(hour)  # one a second would be 3,600
    night = _ticks(8 * 3600)
    assert len(night) <= len(hour) + 7 * 3600 / MAX_INTERVAL_S + 1
    waits = [tick_wait(at) for at in [0.0, *night]]
    assert max(waits) == MAX_INTERVAL_S and min(waits) == DEFAULT_INTERVAL_S
    assert waits == sorted(waits)  # never more often as it ages
