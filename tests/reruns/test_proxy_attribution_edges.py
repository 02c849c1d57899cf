"""Which slot and call_index each call of the metering proxy gets, and what closing an attempt's
token ends, at the edges mutation testing found unguarded (tests/mutants): deferred calls
attributed later (one token for a whole inspect_ai eval), call numbers that go on across a
slot's tries and a later process, a closed or unknown token, and the call recording's state
dropped when a token closes. A real provider over loopback, the real proxy and recorder."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from recording_helpers import joined_to_calls, read_records, recording_of
from reruns_helpers import LoopbackServer, read_rows

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns import rundir
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.recording import CallRecorder
from driftdesk.rundir import RECORDING_SUFFIX

KEY = "sk-live/Attribution-edges-0123456789abcdef"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]

Slot = tuple[str | None, int | None, int | None]  # (task_id, attempt, call_index) of a row


class ChatProvider(LoopbackServer):
    """A chat completions endpoint that answers every question with "ok"."""

    url_suffix = "/v1"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.answer)

    async def answer(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "ok"}},
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            }
        )


@pytest.fixture
async def provider() -> AsyncIterator[ChatProvider]:
    server = ChatProvider()
    await server.start()
    yield server
    await server.stop()


ProxyFactory = Callable[..., Awaitable[MeteringProxy]]


@pytest.fixture
def seen() -> list[dict[str, Any]]:
    """The rows the proxies' ``on_call`` was given, in order."""
    return []


@pytest.fixture
async def make_proxy(
    provider: ChatProvider, tmp_path: Path, seen: list[dict[str, Any]]
) -> AsyncIterator[ProxyFactory]:
    """A started proxy on ``tmp_path`` (the run dir), with a call recorder unless told not."""
    started: list[MeteringProxy] = []

    async def make(
        *, recorded: bool = True, call_counts: dict[tuple[str, int], int] | None = None
    ) -> MeteringProxy:
        proxy = MeteringProxy(
            run_id="r",
            upstream_base_url=provider.url,
            protocol="openai",
            real_key=KEY,
            calls_file=JsonlAppender(tmp_path / rundir.CALLS),
            on_call=seen.append,
            call_counts=call_counts,
            recorder=CallRecorder(tmp_path, KEY) if recorded else None,
        )
        await proxy.start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        await proxy.stop()


async def _ask(proxy: MeteringProxy, token: str, question: str = "q") -> int:
    """One chat call through the proxy on ``token``; its status."""
    body = {"model": "m", "tools": TOOLS, "messages": [{"role": "user", "content": question}]}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url_for(token) + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {proxy.run_key}"},
        ) as response,
    ):
        await response.read()
        return response.status


def _slots(rows: list[dict[str, Any]]) -> list[Slot]:
    return [(r["task_id"], r["attempt"], r["call_index"]) for r in rows]


def _written(run_dir: Path) -> list[Slot]:
    path = run_dir / rundir.CALLS
    return _slots(read_rows(path)) if path.exists() else []


async def test_deferred_calls_are_numbered_in_their_slot_once_attributed(
    make_proxy: ProxyFactory, seen: list[dict[str, Any]], tmp_path: Path
) -> None:
    # ("t", 1) had two calls in an earlier process: its numbers go on from 2.
    proxy = await make_proxy(call_counts={("t", 1): 2})
    token = proxy.open_attempt("", -1, deferred=True)
    for question in ("a", "b", "c", "d", "e"):
        assert await _ask(proxy, token, question) == 200
    calls = (await proxy.settle(token)).calls
    assert len(calls) == 5 and {c["call_index"] for c in calls} == {None}
    assert _written(tmp_path) == [] and seen == []  # nothing before it is named
    proxy.attribute(calls[0], "t", 1)
    proxy.attribute(calls[1], "u", 0)
    proxy.attribute(calls[2], "t", 1)
    proxy.attribute(calls[3], None, None)  # no sample named it: a call of no attempt
    proxy.attribute(calls[4], "t", None)  # half a slot is no slot either
    expected = [("t", 1, 2), ("u", 0, 0), ("t", 1, 3), (None, None, None), ("t", None, None)]
    assert _written(tmp_path) == expected
    assert _slots(seen) == expected
    assert proxy.close_attempt(token) is not None
    await proxy.stop()
    # Recorded in the slots they were attributed to, under the same numbers; no slot, no file.
    records, torn = read_records(recording_of(tmp_path, "t", 1))
    assert not torn and [r["call_index"] for r in records] == [2, 3]
    joined_to_calls(tmp_path, records, "t", 1)
    records, torn = read_records(recording_of(tmp_path, "u", 0))
    assert not torn and [r["call_index"] for r in records] == [0]
    assert len(list(tmp_path.glob("attempts/*/*" + RECORDING_SUFFIX))) == 2


async def test_call_numbers_go_on_across_a_slots_tries_and_processes(
    make_proxy: ProxyFactory, seen: list[dict[str, Any]], tmp_path: Path
) -> None:
    proxy = await make_proxy(recorded=False)
    first_try = proxy.open_attempt("t", 0)
    for _ in range(2):
        assert await _ask(proxy, first_try) == 200
    await proxy.settle(first_try)
    proxy.close_attempt(first_try)
    retry = proxy.open_attempt("t", 0)  # the same slot's next try counts on
    other = proxy.open_attempt("t", 1)  # another slot counts from 0
    for token in (retry, other, other):
        assert await _ask(proxy, token) == 200
        await proxy.settle(token)
    deferred = proxy.open_attempt("", -1, deferred=True)
    assert await _ask(proxy, deferred) == 200
    (late,) = (await proxy.settle(deferred)).calls
    proxy.attribute(late, "t", 0)  # an attributed call shares the slot's numbers
    expected = [("t", 0, 0), ("t", 0, 1), ("t", 0, 2), ("t", 1, 0), ("t", 1, 1), ("t", 0, 3)]
    assert _written(tmp_path) == expected
    assert _slots(seen) == expected
    for token in (retry, other, deferred):
        proxy.close_attempt(token)
    await proxy.stop()
    # A later process on the same run dir (a resume) counts on from what calls.jsonl holds.
    resumed = await make_proxy(recorded=False, call_counts=rundir.count_calls(tmp_path))
    for task_id, attempt in (("t", 0), ("t", 1), ("t", 2)):
        token = resumed.open_attempt(task_id, attempt)
        assert await _ask(resumed, token) == 200
        await resumed.settle(token)
    assert _written(tmp_path)[len(expected) :] == [("t", 0, 4), ("t", 1, 2), ("t", 2, 0)]


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "not-recorded"])
async def test_a_closed_token_is_refused_and_closing_it_again_is_harmless(
    make_proxy: ProxyFactory, recorded: bool
) -> None:
    proxy = await make_proxy(recorded=recorded)
    token = proxy.open_attempt("t", 2)
    assert await _ask(proxy, token) == 200
    await proxy.settle(token)
    closed = proxy.close_attempt(token)
    assert closed is not None
    assert (closed.task_id, closed.attempt, len(closed.calls)) == ("t", 2, 1)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url_for(token) + "/chat/completions",
            json={"model": "m", "messages": []},
            headers={"Authorization": f"Bearer {proxy.run_key}"},
        ) as response,
    ):
        assert response.status == 404
        assert (await response.json())["error"]["type"] == "driftdesk_proxy_unknown_attempt"
    assert proxy.close_attempt(token) is None  # twice: nothing left to close
    assert proxy.close_attempt("never-opened") is None
    with pytest.raises(KeyError):
        proxy.attempt_calls(token)


async def test_a_slots_next_try_is_recorded_afresh(
    make_proxy: ProxyFactory, tmp_path: Path
) -> None:
    # Within a try, a call that repeats the previous one's conversation is recorded as what it
    # adds to it; the next try starts a new conversation, recorded whole.
    proxy = await make_proxy()
    for _ in range(2):  # two tries of one slot, two identical calls each
        token = proxy.open_attempt("t", 0)
        for _ in range(2):
            assert await _ask(proxy, token) == 200
            await proxy.settle(token)
        proxy.close_attempt(token)
    await proxy.stop()
    records, torn = read_records(recording_of(tmp_path, "t", 0))
    assert not torn and [r["call_index"] for r in records] == [0, 1, 2, 3]
    requests = [r["request"] for r in records]
    assert [r["base"] for r in requests] == [0, 1, 0, 1]
    assert ["tools" in r for r in requests] == [True, False, True, False]
    assert requests[2]["tools"] == requests[0]["tools"] != []


async def test_a_deferred_tokens_slots_are_recorded_afresh_after_it_closes(
    make_proxy: ProxyFactory, tmp_path: Path
) -> None:
    # Two evals in a row (one deferred token each) whose calls go to the same slot.
    proxy = await make_proxy()
    for _ in range(2):
        token = proxy.open_attempt("", -1, deferred=True)
        for _ in range(2):
            assert await _ask(proxy, token) == 200
        for call in list((await proxy.settle(token)).calls):
            proxy.attribute(call, "t", 1)
        proxy.close_attempt(token)
    await proxy.stop()
    records, torn = read_records(recording_of(tmp_path, "t", 1))
    assert not torn and [r["call_index"] for r in records] == [0, 1, 2, 3]
    assert [r["request"]["base"] for r in records] == [0, 1, 0, 1]
