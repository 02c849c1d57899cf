"""Trajectories: the recording read as the spec writes it, the steps of each wire protocol,
link events where they hit, the transcript and imported sources, actions and divergence."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from recording_fixtures import (
    GOOD_ANSWER,
    LOOKUP,
    ORDER,
    RASH_ANSWER,
    SYSTEM,
    append_jsonl,
    append_record,
    attempt_row,
    write_manifest,
    write_slot,
)

from driftdesk.analysis.imports import import_results
from driftdesk.analysis.trajectory import (
    Action,
    action_sequence,
    first_divergence,
    load_trajectory,
    read_recording,
    trajectory_from_messages,
    trajectory_from_run,
)
from driftdesk.rundir import RECORDING_SUFFIX, TRAJECTORY_SUFFIX, attempt_file


def kinds(traj) -> list[str]:
    return [s.kind for s in traj.steps]


# --- reading the recording ------------------------------------------------------------------


def test_the_recording_is_one_gzip_stream_and_full_items_are_rebuilt(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    recorder = write_slot(tmp_path, "t", 0, [LOOKUP, ORDER, GOOD_ANSWER], outcome="pass")
    raw = recorder.path.read_bytes()
    assert raw.count(b"\x1f\x8b\x08") >= 3  # one member per record
    assert len(gzip.decompress(raw).splitlines()) == 3  # concatenated members: one stream

    records, problems = read_recording(recorder.path)
    assert problems == []
    assert [r.call_index for r in records] == [0, 1, 2]
    assert [r.record["request"]["base"] for r in records] == [0, 2, 4]  # only new items sent
    # full(n) = full(n-1)[:base] + items: the whole conversation as the model saw it
    assert [len(r.items) for r in records] == [2, 4, 6]
    assert records[2].items[0] == {"role": "system", "content": SYSTEM}
    assert records[2].items[4] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_order_details", "arguments": '{"order_id": "#W1"}'},
            }
        ],
    }
    assert [i.get("role") for i in records[1].new_items] == ["assistant", "tool"]


def test_a_torn_last_member_is_reported_and_whole_records_are_kept(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    recorder = write_slot(tmp_path, "t", 0, [LOOKUP, GOOD_ANSWER], outcome="pass")
    whole = recorder.path.read_bytes()
    member = gzip.compress(b'{"v": 1, "call_index": 2, "request": {"base": 0, "items": []}}\n')
    recorder.path.write_bytes(whole + member[: len(member) // 2])  # killed mid-write

    records, problems = read_recording(recorder.path)
    assert [r.call_index for r in records] == [0, 1]
    assert len(problems) == 1 and problems[0].startswith("record 3: torn last gzip member")
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and kinds(traj) == ["user", "model", "tool_result", "model"]
    assert traj.problems == [f"0{RECORDING_SUFFIX}: {problems[0]}"]


def test_a_malformed_record_is_named_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "x.calls.jsonl.gz"
    first = [{"role": "user", "content": "hi"}]
    append_record(
        path,
        {
            "v": 1,
            "call_index": 0,
            "protocol": "chat",
            "request": {"base": 0, "items": first},
            "response": {"text": "", "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}]},
        },
    )
    with open(path, "ab") as fh:
        fh.write(gzip.compress(b"{not json\n"))
    append_record(
        path,
        {
            "v": 1,
            "call_index": 2,
            "protocol": "chat",
            "request": {"base": 3, "items": [{"role": "tool", "content": "r"}]},
            "response": {"text": "done", "tool_calls": []},
        },
    )
    records, problems = read_recording(path)
    assert [r.call_index for r in records] == [0, 2]
    assert problems[0].startswith("record 2: not JSON")
    # record 3's base counts items of the record that was lost: said, not guessed
    assert problems[1] == (
        "record 3: base 3 is past the previous call's 1 items; the items before it are unknown"
    )
    assert records[1].items_known is False


def test_a_record_cut_by_the_cap_keeps_its_tool_names(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    append_jsonl(tmp_path / "attempts.jsonl", attempt_row("t", 0, "fail"))
    path = attempt_file(tmp_path, "t", 0, RECORDING_SUFFIX)
    append_record(
        path,
        {
            "v": 1,
            "call_index": 0,
            "protocol": "chat",
            "request": {"base": 0, "params": {"model": "m"}},  # items, tools, system dropped
            "response": {"tool_calls": [{"id": "c", "name": "get_user_details"}]},
            "truncated": True,
        },
    )
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and kinds(traj) == ["model"]
    (turn,) = traj.steps
    assert turn.tool_calls == [("get_user_details", "")]  # its arguments were not recorded
    assert turn.detail["truncated"] is True
    assert action_sequence(traj) == [Action("call", "get_user_details", "")]


# --- the three protocols ----------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_steps_of_each_protocol(tmp_path: Path, protocol: str) -> None:
    write_manifest(tmp_path)
    script = [LOOKUP, ("say", "Which order?", "The one from May."), ORDER, GOOD_ANSWER]
    write_slot(tmp_path, "t", 0, script, outcome="pass", protocol=protocol)
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and traj.source == "recording" and traj.outcome == "pass"
    assert kinds(traj) == [
        "user",
        "model",
        "tool_result",
        "model",
        "user",
        "model",
        "tool_result",
        "model",
    ]
    steps = traj.steps
    assert steps[0].text == "Where is my order #W1?"  # the system prompt is not a step
    assert steps[1].tool_calls == [("get_user_details", '{"user_id":"u1"}')]
    assert steps[2].text == '{"name": "Ada", "orders": ["#W1"]}'
    assert steps[2].detail["tool_call_id"] == "call_0"
    assert (steps[3].text, steps[4].text) == ("Which order?", "The one from May.")
    assert steps[7].text == "Your order #W1 was delivered yesterday."
    # each model turn's figures come from its calls.jsonl row (same call_index)
    assert [s.call_index for s in traj.model_turns] == [0, 1, 2, 3]
    assert {(s.tokens, s.latency_ms, s.served_model) for s in traj.model_turns} == {
        (120, 250.0, "model-x")
    }
    assert [i for i, s in enumerate(steps)] == [s.index for s in steps]


def test_messages_user_turn_mixing_tool_results_and_text(tmp_path: Path) -> None:
    path = attempt_file(tmp_path, "t", 0, RECORDING_SUFFIX)
    write_manifest(tmp_path)
    append_jsonl(tmp_path / "attempts.jsonl", attempt_row("t", 0, "pass"))
    items = [{"role": "user", "content": [{"type": "text", "text": "Cancel #W1"}]}]
    append_record(
        path,
        {
            "v": 1,
            "call_index": 0,
            "protocol": "messages",
            "request": {"base": 0, "items": items, "system": SYSTEM},
            "response": {
                "text": "",
                "tool_calls": [{"id": "tu1", "name": "cancel", "arguments": '{"id": "#W1"}'}],
                "reasoning": "The user wants a cancellation.",
            },
        },
    )
    follow = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "cancel"}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu1",
                    "content": [{"type": "text", "text": "ok"}],
                },
                {"type": "text", "text": "Also refund me."},
            ],
        },
    ]
    append_record(
        path,
        {
            "v": 1,
            "call_index": 1,
            "protocol": "messages",
            "request": {"base": 1, "items": follow, "system_same": True},
            "response": {"text": "Done and refunded.", "tool_calls": []},
        },
    )
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None
    assert [(s.kind, s.text) for s in traj.steps] == [
        ("user", "Cancel #W1"),
        ("model", ""),
        ("tool_result", "ok"),
        ("user", "Also refund me."),
        ("model", "Done and refunded."),
    ]
    assert traj.steps[1].detail["reasoning"] == "The user wants a cancellation."
    assert traj.steps[2].detail == {"tool_call_id": "tu1"}


# --- link events ----------------------------------------------------------------------------------


def test_link_events_sit_before_the_turn_they_held_up(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    write_slot(
        tmp_path,
        "t",
        0,
        [LOOKUP, ORDER, GOOD_ANSWER],
        outcome="pass",
        failures={0: [(429, "429")], 2: [(502, "502"), (200, "truncated")]},
        mismatch={1},
    )
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None
    events = [
        (s.index, s.detail["kind"], s.detail["retried"])
        for s in traj.steps
        if s.kind == "link_event"
    ]
    shown = [(s.kind, s.call_index) for s in traj.steps]
    assert shown == [
        ("user", None),
        ("link_event", 0),  # the 429 on call 0, retried by call 1
        ("model", 1),
        ("tool_result", None),
        ("link_event", 2),  # call 2 was answered by model-y: before its own turn
        ("model", 2),
        ("tool_result", None),
        ("link_event", 3),  # a 502, then a stream cut short, then the answer
        ("link_event", 4),
        ("model", 5),
    ]
    assert events == [
        (1, "429", True),
        (4, "model_mismatch", True),
        (7, "502", True),
        (8, "truncated", True),
    ]
    assert traj.steps[5].served_model == "model-y"


def test_a_failure_nothing_answered_after_ends_the_trajectory(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    write_slot(tmp_path, "t", 0, [LOOKUP], outcome="link_error", trailing_failures=[(500, "500")])
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and kinds(traj) == ["user", "model", "tool_result", "link_event"]
    assert traj.steps[-1].detail == {"kind": "500", "status": 500, "retried": False}


# --- other sources ------------------------------------------------------------------------------


def test_the_builtin_transcript_is_the_fallback_with_link_events(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    transcript = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Where is #W1?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c0",
                    "type": "function",
                    "function": {"name": "get_order_details", "arguments": '{"order_id":"#W1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "delivered"},
        {"role": "assistant", "content": "It was delivered."},
    ]
    path = attempt_file(tmp_path, "t", 0, ".transcript.json")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(transcript, indent=1))
    call = {"run_id": "run-1", "task_id": "t", "attempt": 0, "latency_ms": 80.0}
    append_jsonl(
        tmp_path / "calls.jsonl", {**call, "call_index": 0, "status": 200, "total_tokens": 50}
    )
    append_jsonl(
        tmp_path / "calls.jsonl", {**call, "call_index": 1, "status": 503, "error_kind": "503"}
    )
    append_jsonl(
        tmp_path / "calls.jsonl", {**call, "call_index": 2, "status": 200, "total_tokens": 70}
    )
    append_jsonl(tmp_path / "attempts.jsonl", attempt_row("t", 0, "pass", total_tokens=120))
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and traj.source == "transcript"
    assert kinds(traj) == ["user", "model", "tool_result", "link_event", "model"]
    assert [s.tokens for s in traj.model_turns] == [50, 70]
    assert traj.tokens == 120


def test_no_recording_or_transcript_is_none(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    append_jsonl(tmp_path / "attempts.jsonl", attempt_row("t", 0, "pass"))
    assert trajectory_from_run(tmp_path, "t", 0) is None
    assert load_trajectory(tmp_path, "t", 0) is None


def test_the_last_row_of_a_slot_gives_the_outcome(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    append_jsonl(tmp_path / "attempts.jsonl", attempt_row("t", 0, "link_error", error_code="429"))
    write_slot(tmp_path, "t", 0, [GOOD_ANSWER], outcome="pass")  # the resumed slot's row
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and traj.outcome == "pass"


def test_tau2_and_inspect_messages_become_steps() -> None:
    tau2 = [
        {"role": "assistant", "content": "Hi! How can I help?", "tool_calls": None, "usage": {"prompt_tokens": 90, "completion_tokens": 9}},
        {"role": "user", "content": "Cancel my trip.", "tool_calls": None},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "name": "get_reservation_details", "arguments": {"reservation_id": "ZFA04Y"}, "requestor": "assistant"}]},
        {"role": "tool", "id": "1", "content": '{"status": "booked"}', "requestor": "assistant"},
        {"role": "assistant", "content": "Cancelled."},
    ]  # fmt: skip
    traj = trajectory_from_messages("0", 0, "pass", tau2, "tau2")
    assert traj is not None
    assert kinds(traj) == ["model", "user", "model", "tool_result", "model"]
    assert traj.steps[0].tokens == 99
    assert traj.steps[2].tool_calls == [("get_reservation_details", '{"reservation_id":"ZFA04Y"}')]

    inspect = [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": [{"type": "text", "text": "What is 6*7?"}]},
        {"role": "assistant", "content": [{"type": "reasoning", "reasoning": "multiply"}, {"type": "text", "text": ""}], "tool_calls": [{"id": "t1", "function": "calc", "arguments": {"b": 7, "a": 6}}]},
        {"role": "tool", "content": "42", "tool_call_id": "t1", "function": "calc"},
        {"role": "assistant", "content": "42"},
    ]  # fmt: skip
    traj = trajectory_from_messages("s1", 0, "pass", inspect, "inspect")
    assert traj is not None
    assert kinds(traj) == ["user", "model", "tool_result", "model"]
    assert traj.steps[1].tool_calls == [("calc", '{"a":6,"b":7}')]
    assert traj.steps[1].detail == {"reasoning": "multiply"}
    assert traj.steps[2].detail == {"tool_call_id": "t1", "function": "calc"}
    assert [a.shown() for a in action_sequence(traj)] == ['call calc({"a":6,"b":7})', 'answer "42"']


def test_imports_keep_trajectories_zero_copy_reads_them_from_the_source(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "key sk-proj-LEAKED0123456789abcdef"},
        {"role": "assistant", "content": "bye"},
    ]  # fmt: skip
    source = tmp_path / "results.jsonl"
    lines = [
        {"task_id": "a", "success": True, "messages": messages},
        {"task_id": "a", "success": False},
        {"task_id": "b", "success": True, "traj": messages[:2]},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))

    linked = import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="linked")
    assert linked.zero_copy and not list(linked.run_dir.rglob(f"*{TRAJECTORY_SUFFIX}"))
    traj = load_trajectory(linked.run_dir, "a", 0)
    assert traj is not None and traj.source == "jsonl" and traj.outcome == "pass"
    assert kinds(traj) == ["user", "model", "tool_result", "model"]
    assert load_trajectory(linked.run_dir, "a", 1) is None  # that row had no conversation

    copied = import_results(source, fmt="jsonl", out=tmp_path / "runs", run_id="copy", copy=True)
    kept = sorted(p.name for p in copied.run_dir.rglob(f"*{TRAJECTORY_SUFFIX}"))
    assert kept == ["0.trajectory.json", "0.trajectory.json"]  # a/0 and b/0
    text = attempt_file(copied.run_dir, "a", 0, TRAJECTORY_SUFFIX).read_text()
    assert "LEAKED0123456789" not in text and "sk-p" in text  # masked, as every import is
    again = load_trajectory(copied.run_dir, "a", 0)
    assert again is not None and again.source == "jsonl"
    assert [s.kind for s in again.steps] == kinds(traj)


# --- actions and divergence ------------------------------------------------------------------


def test_actions_are_calls_with_canonical_arguments_then_the_answer() -> None:
    messages = [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [{"function": {"name": "find", "arguments": '{"b": 1, "a": [2, 3]}'}}]},
        {"role": "tool", "content": "found"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "raw", "arguments": "not json"}}]},
        {"role": "tool", "content": "ok"},
        {"role": "assistant", "content": "  Done,\n\n  all   good. "},
    ]  # fmt: skip
    traj = trajectory_from_messages("t", 0, "pass", messages, "tau-bench")
    assert traj is not None
    assert action_sequence(traj) == [
        Action("call", "find", '{"a":[2,3],"b":1}'),
        Action("call", "raw", "not json"),
        Action("answer", "", "Done, all good."),
    ]
    with_text = action_sequence(traj, text=True)
    assert [a.kind for a in with_text] == ["say", "call", "call", "answer"]
    assert with_text[0].value == "Let me look."


def test_first_divergence_including_a_side_that_ended() -> None:
    lookup = Action("call", "get_user_details", '{"user_id":"u1"}')
    order = Action("call", "get_order_details", '{"order_id":"#W1"}')
    answer = Action("answer", "", "Delivered.")
    assert first_divergence([lookup, order, answer], [lookup, order, answer]) is None
    split = first_divergence([lookup, order, answer], [lookup, answer])
    assert split is not None and (split.step, split.a, split.b) == (1, order, answer)
    ended = first_divergence([lookup], [lookup, order])
    assert ended is not None and (ended.step, ended.a, ended.b) == (1, None, order)
    assert first_divergence([], [answer]) is not None
    # the same call with its arguments in another order is the same action
    same = Action("call", "get_user_details", '{"user_id":"u1"}', step=7)
    assert first_divergence([lookup], [same]) is None


def test_divergence_of_recorded_attempts(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    write_slot(tmp_path, "t", 0, [LOOKUP, ORDER, GOOD_ANSWER], outcome="pass")
    write_slot(tmp_path, "t", 1, [LOOKUP, RASH_ANSWER], outcome="fail", protocol="messages")
    a, b = trajectory_from_run(tmp_path, "t", 0), trajectory_from_run(tmp_path, "t", 1)
    assert a is not None and b is not None
    split = first_divergence(a, b)
    assert split is not None and split.step == 1
    assert split.a is not None and split.a.name == "get_order_details"
    assert split.b is not None and split.b.value == "Your order is on its way."


# --- tries and re-sent items ---------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_an_attempt_is_its_final_try_and_earlier_tries_are_kept_apart(
    tmp_path: Path, protocol: str
) -> None:
    """A try cut by a 429 had looked the order up first; the final try looked the user up.
    The trajectory is the final try's alone; the abandoned try keeps its own steps and the 429
    that ended it (named by its call_index, as in calls.jsonl)."""
    write_manifest(tmp_path)
    write_slot(
        tmp_path,
        "t",
        0,
        [LOOKUP, ORDER, GOOD_ANSWER],
        outcome="pass",
        protocol=protocol,
        earlier=[[ORDER]],
    )
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and not traj.problems and traj.tries_known
    assert traj.try_number == 2
    assert [a.shown() for a in action_sequence(traj)] == [
        'call get_user_details({"user_id":"u1"})',
        'call get_order_details({"order_id":"#W1"})',
        'answer "Your order #W1 was delivered yesterday."',
    ]
    assert [s.kind for s in traj.steps] == [
        "user", "model", "tool_result", "model", "tool_result", "model"
    ]  # fmt: skip
    [earlier] = traj.earlier_tries
    assert earlier.number == 1 and earlier.ended_by == "429 at call 1" and earlier.calls == 2
    assert [s.kind for s in earlier.steps] == ["user", "model", "tool_result", "link_event"]
    assert earlier.summary == "try 1 — 429 at call 1, discarded (4 steps)"
    # The final try's link events are its own: none here.
    assert all(s.kind != "link_event" for s in traj.steps)


def test_a_recording_from_before_tries_reads_as_one_try(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    write_slot(tmp_path, "t", 0, [LOOKUP, GOOD_ANSWER], outcome="pass")  # v1: no "try"
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None
    assert (traj.try_number, traj.earlier_tries, traj.tries_known) == (1, [], False)
    assert [s.kind for s in traj.steps] == ["user", "model", "tool_result", "model"]


@pytest.mark.parametrize("tries", [False, True], ids=["v1", "v2"])
def test_a_moving_cache_marker_re_sends_no_step(tmp_path: Path, tries: bool) -> None:
    """Claude Code marks only its newest message with cache_control (and sends its text as
    blocks): every earlier message is sent once more with the marker gone, which the writer's
    byte-equal base does not share. Re-sent items are no new steps: the prompt and each tool
    result appear once (old recordings included)."""
    write_manifest(tmp_path)
    write_slot(
        tmp_path,
        "t",
        0,
        [LOOKUP, ORDER, GOOD_ANSWER],
        outcome="pass",
        protocol="messages",
        cache_marker=True,
        tries=tries,
    )
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and not traj.problems
    assert [s.kind for s in traj.steps] == [
        "user", "model", "tool_result", "model", "tool_result", "model"
    ]  # fmt: skip
    assert [s.text for s in traj.steps if s.kind == "tool_result"] == [LOOKUP[3], ORDER[3]]


def test_chat_history_sent_whole_and_rewritten_is_no_new_step(tmp_path: Path) -> None:
    """Chat Completions sends the whole history each call; a client that drops a tool
    result's cache marker or sends a message's text as blocks re-sends the same items."""
    from driftdesk.analysis.recording import same_item

    assert same_item(
        {"role": "user", "content": "hi"},
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {}}]},
    )
    assert not same_item({"role": "user", "content": "hi"}, {"role": "user", "content": "ho"})
    write_manifest(tmp_path)
    write_slot(
        tmp_path, "t", 0, [LOOKUP, GOOD_ANSWER], outcome="pass", protocol="chat", cache_marker=True
    )
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None
    assert [s.kind for s in traj.steps] == ["user", "model", "tool_result", "model"]


def test_responses_chained_by_previous_response_id_send_only_new_items(tmp_path: Path) -> None:
    """A Responses client that chains calls with ``previous_response_id`` sends only the new
    items (the tool's output), not the history: each is one new step, none is lost or
    repeated."""
    write_manifest(tmp_path)
    path = attempt_file(tmp_path, "t", 0, RECORDING_SUFFIX)
    prompt = {"type": "message", "role": "user", "content": "Where is my order #W1?"}
    output = {"type": "function_call_output", "call_id": "c0", "output": "delivered"}
    call = {"id": "c0", "name": "get_order_details", "arguments": '{"order_id": "#W1"}'}
    for index, (items, params, response) in enumerate(
        [
            ([prompt], {}, {"text": "", "tool_calls": [call]}),
            (
                [output],
                {"previous_response_id": "resp_1"},
                {"text": "Delivered.", "tool_calls": []},
            ),
        ]
    ):
        append_record(
            path,
            {
                "v": 2,
                "call_index": index,
                "try": 1,
                "protocol": "responses",
                "request": {"base": 0, "items": items, "params": params},
                "response": response,
            },
        )
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None and not traj.problems
    assert [(s.kind, s.text) for s in traj.steps] == [
        ("user", "Where is my order #W1?"),
        ("model", ""),
        ("tool_result", "delivered"),
        ("model", "Delivered."),
    ]


def test_a_side_request_between_turns_doubles_nothing(tmp_path: Path) -> None:
    """Claude Code may ask for a title or a summary between two turns of the conversation:
    the next turn's request extends the turn before the side request, not the side request,
    and its history is not taken as new again."""
    write_manifest(tmp_path)
    path = attempt_file(tmp_path, "t", 0, RECORDING_SUFFIX)
    prompt = {"role": "user", "content": [{"type": "text", "text": "Fix calc.py."}]}
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "u0", "name": "Bash",
                                              "input": {"command": "cat calc.py"}}]}  # fmt: skip
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u0",
                                           "content": "def add(a, b): ..."}]}  # fmt: skip
    side = {"role": "user", "content": "Write a 5-word title for: Fix calc.py."}
    calls = [
        ([prompt], 0, {"text": "", "tool_calls": [
            {"id": "u0", "name": "Bash", "arguments": '{"command": "cat calc.py"}'}]}),
        ([side], 0, {"text": "Fixing calc", "tool_calls": []}),
        ([prompt, use, result], 0, {"text": "Done.", "tool_calls": []}),
    ]  # fmt: skip
    for index, (items, base, response) in enumerate(calls):
        append_record(
            path,
            {
                "v": 2,
                "call_index": index,
                "try": 1,
                "protocol": "messages",
                "request": {"base": base, "items": items},
                "response": response,
            },
        )
    traj = trajectory_from_run(tmp_path, "t", 0)
    assert traj is not None
    assert [(s.kind, s.text) for s in traj.steps] == [
        ("user", "Fix calc.py."),
        ("model", ""),
        ("user", "Write a 5-word title for: Fix calc.py."),  # the side request, as it was
        ("model", "Fixing calc"),
        ("tool_result", "def add(a, b): ..."),
        ("model", "Done."),
    ]
