"""Judging, suite loading, Retry-After parsing and the headless progress line."""

from __future__ import annotations

import email.utils
import io
import json
import random
from pathlib import Path

import pytest

from driftdesk.reruns.events import (
    AttemptEnded,
    AttemptFinished,
    AttemptStarted,
    CallRecorded,
    RunFinished,
    RunStarted,
)
from driftdesk.reruns.progress import TextProgress
from driftdesk.reruns.retry import RetryPolicy, is_retryable, parse_retry_after
from driftdesk.reruns.suites import SuiteError, builtin_suites, judge, load_suite


@pytest.mark.parametrize(
    ("expected", "answer", "ok"),
    [
        ({"equals": "Paris"}, "  paris\n", True),
        ({"equals": "New  York"}, "new york", True),
        ({"equals": "42"}, "42.", False),
        ({"contains": "Canberra"}, "The capital is CANBERRA.", True),
        ({"one_of": ["yes", "yes."]}, " Yes. ", True),
        ({"regex": r"\d{4}-\d{2}-\d{2}"}, " 2024-03-05\n", True),
        ({"regex": r"0xff"}, "0xFF", False),  # regex is case-sensitive: strict formats
        ({"json_equals": {"a": 1}}, '```json\n{"a": 1}\n```', True),
        ({"json_equals": {"a": 1}}, '{"a": 2}', False),
        ({"json_equals": [1, 2]}, "not json", False),
    ],
)
def test_judge_normalises_as_documented(expected: dict, answer: str, ok: bool) -> None:
    assert judge(expected, answer) is ok


def test_builtin_suite_is_well_formed() -> None:
    assert "basic" in builtin_suites()
    suite = load_suite("basic")
    assert len(suite.tasks) >= 30 and not suite.problems
    assert all(judge(t.expected, t.reference_answer or "") for t in suite.tasks)
    assert {t.scenario_id for t in suite.tasks if t.scenario_id} == {"invoice-7", "travel-2"}
    assert sum(1 for t in suite.tasks if t.tools) >= 8


def test_malformed_suite_lines_are_reported_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = {"task_id": "a", "prompt": "p", "expected": {"equals": "x"}}
    path.write_text(json.dumps(good) + "\n{not json\n")
    suite = load_suite(str(path))
    assert [t.task_id for t in suite.tasks] == ["a"]
    assert [p.line_number for p in suite.problems] == [2]
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "expected": {"approx": 1}}))
    with pytest.raises(SuiteError, match=r"s\.jsonl:2"):
        load_suite(str(path))


def test_retry_after_forms_and_bounds() -> None:
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    now = 1_000_000.0
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(7, abs=1)
    assert parse_retry_after({"Retry-After": "soon"}) is None
    policy = RetryPolicy(max_retries=3, base_delay_s=1.0, max_delay_s=5.0)
    rng = random.Random(0)
    assert policy.delay(1, 60.0, rng) == 5.0  # the server's ask, capped
    assert 2.0 <= policy.delay(3, None, rng) <= 4.0  # 4 s ceiling, equal jitter
    assert policy.delay(10, None, rng) <= 5.0
    assert [is_retryable(c) for c in ("429", "408", "503", "timeout", "connection")] == [True] * 5
    assert [is_retryable(c) for c in ("401", "403", "404", "insufficient_quota", None)] == [
        False
    ] * 5


def test_plain_progress_lines_when_not_a_tty(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = TextProgress(out, is_tty=False, plain_interval_s=0.0)
    progress.on_event(
        RunStarted("r", tmp_path, {"resumed": False, "notices": ["n1"]}, ("a",), 2, 2)
    )
    progress.on_event(AttemptStarted("r", "a", 0))
    progress.on_event(CallRecorded("r", "a", 0, {"prompt_tokens": 10, "completion_tokens": 5}))
    assert progress.stats.running == 1
    progress.on_event(AttemptEnded("r", "a", 0))
    assert progress.stats.running == 0  # its work is over, its row not yet on disk
    row = {"outcome": "link_error", "error_code": "429", "retries": 2}
    progress.on_event(AttemptFinished("r", row))
    progress.on_event(RunFinished("r", "completed", progress.stats))
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    assert "note: n1" in text
    last = text.strip().splitlines()[-1]
    assert "1/2" in last and "link 1 (429:1)" in last and "tokens 15" in last
