"""``explain``: why a task wobbles, in sentences and in JSON, through the real command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from recording_fixtures import (
    GOOD_ANSWER,
    LOOKUP,
    ORDER,
    RASH_ANSWER,
    append_jsonl,
    attempt_row,
    write_manifest,
    write_slot,
    write_wobbly_task,
)

from driftdesk.analysis.explain import NoTrajectoryError, UnknownTaskError, explain_task
from driftdesk.analysis.imports import import_results
from driftdesk.rundir import TRAJECTORY_SUFFIX, attempt_file


def driftdesk(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "driftdesk", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_sentences_of_a_wobbly_task(tmp_path: Path) -> None:
    write_wobbly_task(tmp_path)
    e = explain_task(tmp_path, "retail-7")
    assert e.groups == {"pass": [0, 1], "fail": [2, 3, 4]}
    assert [(v.attempt, v.outcome) for v in e.apart] == [(5, "link_error")]  # in no group
    assert e.sentences() == [
        "pass/fail pairs first diverge at step 1 in 6/6 pairs",
        "step 1: passes call get_user_details 2/2; fails answer 3/3",
        "step 2: passes call get_order_details 2/2; fails had ended 3/3",
        "step 3: passes answer 2/2; fails had ended 3/3",
        "fails: 429 retried before step 1 in 1/3",
        "link_error attempts: 500 not retried before step 2 in 1/1",
    ]
    # each pair: the pass's lookup against the fail's rash answer
    assert {(p, f, d.step if d else None) for p, f, d in e.pairs} == {
        (p, f, 0) for p in (0, 1) for f in (2, 3, 4)
    }
    # turns, tokens (120 per answered call) and latency (1000 + 100 per turn) per group
    assert e.figures["pass"] == {
        "turns": {"mean": 3.0, "median": 3.0},
        "tokens": {"mean": 360.0, "median": 360.0},
        "latency_ms": {"mean": 1300.0, "median": 1300.0},
    }
    assert e.figures["fail"]["turns"] == {"mean": 1.0, "median": 1.0}
    assert e.figures["fail"]["tokens"] == {"mean": 120.0, "median": 120.0}


def test_the_most_common_action_wins_a_step(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    for attempt in range(4):  # 3 of 4 passes look the user up first, one the order
        first = ORDER if attempt == 3 else LOOKUP
        write_slot(tmp_path, "t", attempt, [first, GOOD_ANSWER], outcome="pass")
    for attempt in (4, 5):
        write_slot(tmp_path, "t", attempt, [RASH_ANSWER], outcome="fail")
    e = explain_task(tmp_path, "t")
    assert e.differences[0].sentence == "step 1: passes call get_user_details 3/4; fails answer 2/2"


def test_explain_on_the_command_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_wobbly_task(run)
    result = driftdesk("explain", str(run), "retail-7", home=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "2 pass (0, 1); 3 fail (2, 3, 4); apart: 5 link_error" in out
    assert "  step 1: passes call get_user_details 2/2; fails answer 3/3\n" in out
    assert "  pass/fail pairs first diverge at step 1 in 6/6 pairs\n" in out
    assert "  fails: 429 retried before step 1 in 1/3\n" in out
    assert "passes  turns 3.0 / 3.0  tokens 360 / 360  latency 1,300 / 1,300 ms" in out
    assert '  4 fail          recording  answer "Your order is on its way."  [429 retried' in out


def test_two_attempts_as_json(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_wobbly_task(run)
    write_slot(run, "retail-7", 6, [LOOKUP], outcome="fail")  # stopped after its lookup
    result = driftdesk(
        "explain", str(run), "retail-7", "--attempts", "0", "2", "--json", home=tmp_path
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["first_divergence"] == {
        "step": 0,
        "a": {
            "attempt": 0,
            "action": {"kind": "call", "name": "get_user_details", "arguments": '{"user_id":"u1"}'},
        },
        "b": {"attempt": 2, "action": {"kind": "answer", "text": "Your order is on its way."}},
    }
    assert [a["attempt"] for a in data["attempts"]] == [0, 2]
    assert data["groups"] == {"pass": [0], "fail": [2]}
    assert data["sentences"][0] == (
        'attempts 0 and 2 first diverge at step 1: 0 call get_user_details({"user_id":"u1"}); '
        '2 answer "Your order is on its way."'
    )
    # one side ended: attempt 6 made the same lookup, then nothing
    ended = driftdesk(
        "explain", str(run), "retail-7", "--attempts", "6", "1", "--json", home=tmp_path
    )
    divergence = json.loads(ended.stdout)["first_divergence"]
    assert divergence["step"] == 1
    assert divergence["a"] == {"attempt": 6, "action": None}
    assert divergence["b"]["action"]["name"] == "get_order_details"
    same = driftdesk(
        "explain", str(run), "retail-7", "--attempts", "0", "1", "--json", home=tmp_path
    )
    assert json.loads(same.stdout)["first_divergence"] is None


def test_text_counts_free_text_as_actions(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    chat = ("say", "Which order do you mean?", "#W1")
    write_slot(tmp_path, "t", 0, [chat, ORDER, GOOD_ANSWER], outcome="pass")
    write_slot(tmp_path, "t", 1, [ORDER, GOOD_ANSWER], outcome="fail")
    assert explain_task(tmp_path, "t").pairs[0][2] is None  # the same calls and answer
    with_text = explain_task(tmp_path, "t", text=True)
    split = with_text.pairs[0][2]
    assert split is not None and split.step == 0
    assert split.a is not None and split.a.shown() == 'say "Which order do you mean?"'


def test_errors_are_one_line_with_their_exit_status(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_wobbly_task(run)
    append_jsonl(run / "attempts.jsonl", attempt_row("bare", 0, "pass"))  # no recording
    cases = [
        (["explain", str(tmp_path / "nowhere"), "retail-7"], 2, "no such run dir"),
        (["explain", str(tmp_path), "retail-7"], 2, "not a run dir"),
        (["explain", str(run), "retail-8"], 2, "no attempt of task 'retail-8'"),
        (["explain", str(run), "retail-7", "--attempts", "0", "9"], 2, "has no attempt 9 (its attempts: 0-5)"),
        (["explain", str(run), "bare"], 1, "no attempt has a recording or a trajectory"),
    ]  # fmt: skip
    for argv, code, words in cases:
        result = driftdesk(*argv, home=tmp_path)
        assert result.returncode == code, (argv, result.stderr)
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1 and words in result.stderr, result.stderr
    with pytest.raises(UnknownTaskError):
        explain_task(run, "retail-8")
    with pytest.raises(NoTrajectoryError):
        explain_task(run, "bare")


def test_a_task_id_with_control_characters_is_shown_escaped(tmp_path: Path) -> None:
    run = tmp_path / "run"
    task = "evil\x1b]0;PWNED\x07\x1b[2J"
    write_manifest(run)
    write_slot(run, task, 0, [LOOKUP, GOOD_ANSWER], outcome="pass")
    write_slot(run, task, 1, [RASH_ANSWER], outcome="fail")
    result = driftdesk("explain", str(run), task, home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "task evil\\x1b]0;PWNED\\x07\\x1b[2J in" in result.stdout
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    missing = driftdesk("explain", str(run), task + "x", home=tmp_path)
    assert missing.returncode == 2 and "\x1b" not in missing.stderr and "\\x1b" in missing.stderr


# --- an imported tau-bench file -------------------------------------------------------------------


def _tau_bench_traj(*, new_item: str, zip_first: bool) -> list[dict]:
    """A tau-bench retail trajectory (litellm messages): identify the user, look the order and
    the product up, exchange the keyboard, confirm."""

    def call(n: int, name: str, arguments: dict) -> list[dict]:
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        ]

    def result(n: int, name: str, content: str) -> dict:
        return {"role": "tool", "tool_call_id": f"call_{n}", "name": name, "content": content}

    who = (
        {"zip": "19122", "first_name": "Yusuf", "last_name": "Rossi"}
        if zip_first
        else {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}
    )
    exchange = {
        "order_id": "#W2378156",
        "item_ids": ["1151293680"],
        "new_item_ids": [new_item],
        "payment_method_id": "credit_card_9513926",
    }
    return [
        {"role": "system", "content": "# Retail agent policy\nAs a retail agent, you can help users..."},
        {"role": "user", "content": "Hi! I'd like to exchange the keyboard from my order #W2378156."},
        {"role": "assistant", "content": "I can help. Could you tell me your name and zip code?"},
        {"role": "user", "content": "Yusuf Rossi, 19122."},
        *call(0, "find_user_id_by_name_zip", who),
        result(0, "find_user_id_by_name_zip", "yusuf_rossi_9620"),
        *call(1, "get_order_details", {"order_id": "#W2378156"}),
        result(1, "get_order_details", '{"order_id": "#W2378156", "status": "delivered", "items": [{"name": "Mechanical Keyboard", "item_id": "1151293680"}]}'),
        {"role": "assistant", "content": "Which keyboard would you like instead?"},
        {"role": "user", "content": "Clicky switches, RGB backlight, full size."},
        *call(2, "get_product_details", {"product_id": "1656367028"}),
        result(2, "get_product_details", '{"variants": {"7706410293": {"switch type": "clicky", "backlight": "RGB", "size": "full size"}, "4843487907": {"switch type": "clicky", "backlight": "white", "size": "80%"}}}'),
        {"role": "assistant", "content": "I'll exchange it for the matching keyboard. Shall I go ahead?"},
        {"role": "user", "content": "Yes, please."},
        *call(3, "exchange_delivered_order_items", exchange),
        result(3, "exchange_delivered_order_items", '{"status": "exchange requested"}'),
        {"role": "assistant", "content": "Done: your exchange is requested. Anything else?"},
        {"role": "user", "content": "###STOP###"},
    ]  # fmt: skip


def test_an_imported_tau_bench_file_diverges_where_a_person_would_say(tmp_path: Path) -> None:
    records = [
        {
            "task_id": 5,
            "trial": 0,
            "reward": 1.0,
            "info": {"reward_info": {"reward": 1.0, "info": {"r_actions": 1.0}}},
            "traj": _tau_bench_traj(new_item="7706410293", zip_first=False),
        },
        {
            # the same conversation, the user's arguments given in another order, but the
            # wrong variant (white backlight, 80%) in the exchange
            "task_id": 5,
            "trial": 1,
            "reward": 0.0,
            "info": {"reward_info": {"reward": 0.0, "info": {"r_actions": 0.0}}},
            "traj": _tau_bench_traj(new_item="4843487907", zip_first=True),
        },
        {
            "task_id": 5,
            "trial": 2,
            "reward": 0.0,
            "info": {"error": "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached"},
            "traj": [],
        },
    ]  # fmt: skip
    source = tmp_path / "tool-calling-gpt-4o-0.0_range_0--1_user-gpt-4o-llm_0101.json"
    source.write_text(json.dumps(records, indent=2))
    imported = import_results(source, out=tmp_path / "runs", run_id="retail")
    assert imported.format == "tau-bench"
    run = imported.run_dir
    assert attempt_file(run, "5", 0, TRAJECTORY_SUFFIX).is_file()
    assert not attempt_file(run, "5", 2, TRAJECTORY_SUFFIX).exists()  # no conversation kept

    result = driftdesk("explain", str(run), "5", "--attempts", "0", "1", "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # find the user, the order, the product: the same; the exchange's new item differs
    assert data["first_divergence"]["step"] == 3
    a, b = data["first_divergence"]["a"], data["first_divergence"]["b"]
    assert a["action"]["name"] == b["action"]["name"] == "exchange_delivered_order_items"
    assert json.loads(a["action"]["arguments"])["new_item_ids"] == ["7706410293"]
    assert json.loads(b["action"]["arguments"])["new_item_ids"] == ["4843487907"]

    whole = driftdesk("explain", str(run), "5", home=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert "1 pass (0); 1 fail (1); apart: 2 link_error" in whole.stdout
    assert "pass/fail pairs first diverge at step 4 in 1/1 pairs" in whole.stdout
    # the same tool on both sides: the sentence names the argument that differs
    assert (
        '  step 4: passes call exchange_delivered_order_items with new_item_ids ["7706410293"] '
        '1/1; fails call exchange_delivered_order_items with new_item_ids ["4843487907"] 1/1\n'
    ) in whole.stdout
    assert "0 pass          tau-bench  call find_user_id_by_name_zip(" in whole.stdout


def test_an_inspect_log_keeps_its_samples_conversations(tmp_path: Path) -> None:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalSample,
        EvalSpec,
        write_eval_log,
    )
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser
    from inspect_ai.scorer import Score
    from inspect_ai.tool import ToolCall

    def sample(epoch: int, user_id: str, grade: str) -> EvalSample:
        lookup = ToolCall(id="t1", function="lookup", arguments={"user_id": user_id})
        return EvalSample(
            id="order-status",
            epoch=epoch,
            input="Where is my order?",
            target="delivered",
            messages=[
                ChatMessageUser(content="Where is my order?"),
                ChatMessageAssistant(content="", tool_calls=[lookup]),
                ChatMessageTool(content="#W1 delivered", tool_call_id="t1", function="lookup"),
                ChatMessageAssistant(content="It was delivered."),
            ],
            scores={"includes": Score(value=grade)},
        )

    spec = EvalSpec(
        created="2026-11-20T09:00:00+00:00",
        task="retail",
        dataset=EvalDataset(samples=1, sample_ids=["order-status"]),
        model="openai/gpt-4.1-mini",
        config=EvalConfig(epochs=2),
    )
    log = tmp_path / "retail.eval"
    samples = [sample(1, "u1", "C"), sample(2, "u2", "I")]
    write_eval_log(EvalLog(status="success", eval=spec, samples=samples), str(log))
    imported = import_results(log, out=tmp_path / "runs")
    assert imported.format == "inspect"
    e = explain_task(imported.run_dir, "order-status")
    assert e.groups == {"pass": [0], "fail": [1]}
    assert [v.source for v in e.views] == ["inspect", "inspect"]
    ((_, _, split),) = e.pairs
    assert split is not None and split.step == 0
    assert split.a is not None and split.a.shown() == 'call lookup({"user_id":"u1"})'


def test_abandoned_tries_are_shown_apart_and_never_compared(tmp_path: Path) -> None:
    """Two passes, two fails; pass 1 and fail 3 were each run again after a try cut by a 429
    that had taken the other group's path. Pairs part at step 1 between the final tries only;
    the abandoned tries are listed folded, with what ended them."""
    run = tmp_path / "run"
    write_manifest(run)
    write_slot(run, "t", 0, [LOOKUP, GOOD_ANSWER], outcome="pass", tries=True)
    write_slot(run, "t", 1, [LOOKUP, GOOD_ANSWER], outcome="pass", earlier=[[RASH_ANSWER]])
    write_slot(run, "t", 2, [RASH_ANSWER], outcome="fail", tries=True)
    write_slot(run, "t", 3, [RASH_ANSWER], outcome="fail", earlier=[[LOOKUP]])
    e = explain_task(run, "t")
    assert {(p, f): d.step if d else None for p, f, d in e.pairs} == {
        (p, f): 0 for p in (0, 1) for f in (2, 3)
    }
    assert e.differences[0].sentence == "step 1: passes call get_user_details 2/2; fails answer 2/2"
    assert "fails: 429 ended a try (run again from scratch) in 1/2" in e.sentences()
    data = e.to_json()
    assert data["tries_unknown"] == []
    by_attempt = {v["attempt"]: v for v in data["attempts"]}
    assert by_attempt[3]["try"] == 2 and by_attempt[3]["tries_recorded"] is True
    assert by_attempt[3]["actions"] == [{"kind": "answer", "text": "Your order is on its way."}]
    assert [s["kind"] for s in by_attempt[3]["steps"]] == ["user", "model"]
    assert by_attempt[3]["steps"][1]["summary"] == "Your order is on its way."
    [earlier] = by_attempt[3]["earlier_tries"]
    assert earlier["try"] == 1 and earlier["ended_by"] == "429 at call 1"
    assert [(s["kind"], s["summary"]) for s in earlier["steps"]] == [
        ("user", "Where is my order #W1?"),
        ("model", 'call get_user_details({"user_id":"u1"})'),
        ("tool_result", '{"name": "Ada", "orders": ["#W1"]}'),
        ("link_event", "429 (status 429)"),
    ]
    result = driftdesk("explain", str(run), "t", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "      try 1 — 429 at call 1, discarded (4 steps)\n    3 fail" in result.stdout
    assert "note:" not in result.stdout


def test_a_run_recorded_before_tries_says_so(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_wobbly_task(run)  # v1 records, rows without "try"
    data = explain_task(run, "retail-7").to_json()
    assert data["tries_unknown"] == [0, 1, 2, 3, 4, 5]
    assert all(v["tries_recorded"] is False for v in data["attempts"])
    result = driftdesk("explain", str(run), "retail-7", home=tmp_path)
    assert (
        "  note: 6 attempts (0-5) recorded before calls said their try: each reads as one try"
        in result.stdout
    )
