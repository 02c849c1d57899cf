"""--inject: reading the spec, the seeded per-call decision, and the fault accounting."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from driftdesk.reruns.injection import (
    FaultInjector,
    InjectionSpec,
    InjectSpecError,
    classify_faults,
    cut_answer,
    injection_figures,
    parse_inject,
)


def test_the_spec_of_the_issue_reads_and_round_trips() -> None:
    spec = parse_inject("429=5%,500=2%,timeout=1%,truncate=1%,drop=1%,slow=5%:3s")
    assert spec is not None
    assert dict(spec.shares) == pytest.approx(
        {"429": 0.05, "500": 0.02, "timeout": 0.01, "truncate": 0.01, "drop": 0.01, "slow": 0.05}
    )
    assert spec.slow_s == 3.0
    assert spec.retry_after_s == 1.0
    assert parse_inject(spec.text()) == spec
    assert InjectionSpec.from_manifest({"injection": spec.to_manifest()}) == spec


def test_the_order_of_the_text_does_not_change_the_spec() -> None:
    assert parse_inject("500=2%, 429=0.05") == parse_inject("429=5%,500=2%")


def test_options_fractions_and_other_server_errors() -> None:
    spec = parse_inject("429=10%:250ms,503=1%,slow=.5")
    assert spec is not None
    assert spec.retry_after_s == 0.25
    assert spec.slow_s == 2.0  # the default delay
    assert dict(spec.shares)["503"] == 0.01
    assert dict(spec.shares)["slow"] == 0.5


@pytest.mark.parametrize("text", [None, "", "none", "OFF", "no"])
def test_nothing_or_none_injects_nothing(text: str | None) -> None:
    assert parse_inject(text) is None
    assert InjectionSpec.from_manifest({}) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("430=5%", "unknown fault '430'"),
        ("429", "write KIND=SHARE"),
        ("429=lots", "a share is a percentage"),
        ("429=150%", "between 0% and 100%"),
        ("429=60%,500=50%", "add up to 110%, over 100%"),
        ("429=1%,429=2%", "429 is given twice"),
        ("drop=1%:3s", "only 429 (its Retry-After) and slow"),
        ("slow=1%:soon", "a duration is like 3s or 500ms"),
        (",", "no fault given"),
    ],
)
def test_a_bad_spec_is_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(InjectSpecError) as caught:
        parse_inject(text)
    message = str(caught.value)
    assert says in message
    assert "\n" not in message


def test_decisions_are_fixed_by_seed_and_call_not_by_asking_order() -> None:
    spec = parse_inject("429=10%,500=5%,truncate=2%")
    assert spec is not None
    keys = [(f"t{t}", a, i) for t in range(40) for a in range(5) for i in range(10)]
    first = FaultInjector(spec, seed=7, hang_s=1.0)
    forward = {key: first.decide(*key) for key in keys}
    second = FaultInjector(spec, seed=7, hang_s=1.0)
    backward = {key: second.decide(*key) for key in reversed(keys)}
    assert forward == backward
    other_seed = FaultInjector(spec, seed=8, hang_s=1.0)
    assert {key: other_seed.decide(*key) for key in keys} != forward


def test_decisions_hit_each_kind_at_its_share() -> None:
    spec = parse_inject("429=10%,500=5%,truncate=2%")
    assert spec is not None
    injector = FaultInjector(spec, seed=0, hang_s=1.0)
    draws = 40_000
    counts = Counter(
        (fault.kind if fault else None)
        for fault in (injector.decide(f"task-{n % 97}", n % 11, n) for n in range(draws))
    )
    # Binomial: 4 standard deviations either side.
    for kind, share in (("429", 0.10), ("500", 0.05), ("truncate", 0.02)):
        sd = (draws * share * (1 - share)) ** 0.5
        assert abs(counts[kind] - draws * share) < 4 * sd, (kind, counts[kind])


def test_cut_answer_keeps_whole_events_of_a_stream_and_half_a_body() -> None:
    stream = b"".join(f'data: {{"n": {n}}}\n\n'.encode() for n in range(10))
    cut = cut_answer(stream, streamed=True)
    assert cut.endswith(b"\n\n")
    assert 0 < len(cut) <= len(stream) // 2
    assert cut_answer(b'{"answer": "forty-two"}', streamed=False) == b'{"answer": '


def _call(error_kind: str | None = None, status: int | None = 200, injected: str | None = None):
    row: dict[str, Any] = {"error_kind": error_kind, "status": status, "injected": injected}
    return row


def test_a_fault_followed_by_a_whole_answer_is_recovered() -> None:
    calls = [_call("429", 429, "429"), _call()]
    assert classify_faults(calls, "pass") == [(0, "recovered")]
    assert injection_figures(calls, "fail") == {
        "injected_faults": 1,
        "injected_recovered": 1,
        "injected_surfaced": 0,
        "injected_misattributed": 0,
    }


def test_a_slow_call_that_arrived_recovers_itself() -> None:
    assert classify_faults([_call(injected="slow")], "pass") == [(0, "recovered")]


def test_a_last_fault_surfaces_on_an_unjudged_attempt_and_is_misattributed_on_a_judged_one() -> (
    None
):
    calls = [_call(), _call("truncated", 200, "truncate")]
    assert classify_faults(calls, "link_error") == [(1, "surfaced")]
    assert classify_faults(calls, "harness_error") == [(1, "surfaced")]
    assert classify_faults(calls, "pass") == [(1, "misattributed")]
    figures = injection_figures(calls, "fail")
    assert figures["injected_misattributed"] == 1
    assert figures["injected_faults"] == 1


def test_calls_without_injection_count_nothing() -> None:
    calls = [_call("500", 500), _call()]
    assert injection_figures(calls, "pass")["injected_faults"] == 0
