"""The metering proxy's book of attempt-tokens: one per try of a (task, attempt) slot, what
the proxy saw for each (``AttemptCalls``), the slots' call numbers and try numbers (going on
across tries and resumes), and where call rows go. ``reruns/proxy.py`` serves the calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from driftdesk.reruns.recording import CallRecorder


class RowSink(Protocol):
    """Where call rows go: a ``JsonlAppender`` or anything with the same ``append``."""

    def append(self, row: dict[str, Any]) -> None: ...


@dataclass
class AttemptCalls:
    """What the proxy saw for one attempt-token (one try of one (task, attempt) slot)."""

    task_id: str
    attempt: int
    calls: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    last_retry_after_s: float | None = None  # from the last failed call's headers
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    # Deferred: the rows are kept here, unwritten, until ``attribute`` names their attempt
    # (one token serves a whole inspect_ai eval, whose calls are sorted out from its log).
    deferred: bool = False
    try_number: int = 1  # the slot's try this token serves, 1-based (every row says it)
    opened_at: float = field(default_factory=time.monotonic)  # absorbing's budget starts here

    def __post_init__(self) -> None:
        self.idle.set()


class AttemptTokens:
    """The open and closed tokens of a run's tries, and the rows their calls make."""

    def __init__(
        self,
        *,
        calls_file: RowSink | None,
        on_call: Callable[[dict[str, Any]], None] | None,
        call_counts: dict[tuple[str, int], int] | None,
        tries: dict[tuple[str, int], int] | None,
        recorder: CallRecorder | None,
    ) -> None:
        self._calls_file = calls_file
        self._on_call = on_call
        self._call_counts = dict(call_counts or {})
        # Tries already begun per slot (a resume's from calls.jsonl): each token is the next.
        self._tries = dict(tries or {})
        self._recorder = recorder  # what each call said (reruns/recording.py); None: not kept
        self._attempts: dict[str, AttemptCalls] = {}
        self._closed: set[str] = set()  # finished tries' tokens: refused, never reissued

    def open_attempt(self, task_id: str, attempt: int, *, deferred: bool = False) -> str:
        # A try's identity at the proxy: a random secret of its own (144 bits), not derived
        # from anything another try sees, so a harness cannot work out a neighbour's URL from
        # its own. A request needs both the run key and a live token; a closed token is
        # refused for good (never issued again).
        token = secrets.token_urlsafe(18)
        while token in self._attempts or token in self._closed:
            token = secrets.token_urlsafe(18)
        number = 1
        if not deferred:
            number = self._tries.get((task_id, attempt), 0) + 1
            self._tries[(task_id, attempt)] = number
        self._attempts[token] = AttemptCalls(task_id, attempt, deferred=deferred, try_number=number)
        return token

    def attribute(self, row: dict[str, Any], task_id: str | None, attempt: int | None) -> None:
        """Write a deferred call row as a call of ``(task_id, attempt)`` (None: of no attempt)."""
        row["task_id"], row["attempt"] = task_id, attempt
        if task_id is not None and attempt is not None:
            row["call_index"] = self._next_call_index(task_id, attempt)
            row["try"] = max(1, self._tries.get((task_id, attempt), 0))
        self._write(row)
        if self._recorder is not None:
            self._recorder.attribute(row)

    def attempt_calls(self, token: str) -> AttemptCalls:
        return self._attempts[token]

    async def settle(self, token: str, timeout_s: float = 2.0) -> AttemptCalls:
        """Wait (bounded) for the attempt's in-flight calls to be recorded."""
        calls = self._attempts[token]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await calls.idle.wait()
        return calls

    def close_attempt(self, token: str) -> AttemptCalls | None:
        calls = self._attempts.pop(token, None)
        self._closed.add(token)
        if calls is not None and self._recorder is not None:
            self._recorder.close(calls.task_id, calls.attempt, deferred=calls.deferred)
        return calls

    def _live_attempt(self, token: str) -> AttemptCalls | None:
        """The open try whose token this is, compared in constant time (a try's token is its
        secret: how long a refusal takes must not tell how much of it was right)."""
        found = None
        for known, calls in self._attempts.items():
            if hmac.compare_digest(token.encode("utf-8", "surrogateescape"), known.encode()):
                found = calls
        return found

    def _next_call_index(self, task_id: str, attempt: int) -> int:
        index = self._call_counts.get((task_id, attempt), 0)
        self._call_counts[(task_id, attempt)] = index + 1
        return index

    def _write(self, row: dict[str, Any]) -> None:
        if self._calls_file is not None:
            self._calls_file.append(row)
        if self._on_call is not None:
            self._on_call(row)
