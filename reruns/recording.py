"""Call recordings: what each provider call of an attempt said, kept beside its other files as
``attempts/<task folder>/<attempt>.calls.jsonl.gz`` (format: docs/ARCHITECTURE.md, "Call
recordings").

One gzip member per call, each one JSON record: the request's conversation items after those
it shares with the slot's previous call (``base``), its system prompt and tools unless
unchanged, its other parameters, and the answer reassembled (``wire.content``). Every string
stored is redacted after JSON decoding, so a key the upstream escaped in any way is masked.

The proxy hands each call's bytes to ``CallRecorder`` on the event loop; reading them,
redacting, compressing and writing run as jobs on the run's single I/O thread, in submission
order (so a slot's records are written in call order, and all the per-slot state below is
touched by that thread only). A slot's file stops taking content at its cap: further records
keep only their figures and say ``"truncated": true``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import marshal
import math
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.fileio import iter_jsonl
from driftdesk.reruns.key_scrub import KeyScrubber
from driftdesk.rundir import (
    CALLS_FILE,
    RECORDING_SUFFIX,
    append_member,
    attempt_file,
    cut_torn_tail,
    gzip_member,
)
from driftdesk.secrets import holds_secret, redact, secret_shapes
from driftdesk.wire import MODEL_PROTOCOLS
from driftdesk.wire.content import RequestContent, answer_content, request_content

log = logging.getLogger(__name__)

# 2: every record says its ``try`` (1-based, as the call's calls.jsonl row); 1: no tries.
RECORD_VERSION = 2
DEFAULT_MAX_RECORDED_MB = 8.0
MIB = 1024 * 1024
# An answer is kept for its record up to this many bytes (the proxy meters a body up to it).
MAX_CAPTURED_BYTES = 16 * MIB
_ERROR_TEXT_BYTES = 2048
# Deferred calls (inspect: attributed once their sample ends) wait in memory with their
# content up to this many times the cap (raw bytes); past it they wait without it.
_HELD_PER_CAP = 4
_HELD_UNCAPPED = 256 * MIB
# No string shorter than this can hold anything redact() masks (its shortest pattern match),
# unless the key itself is shorter.
_SHORTEST_SECRET_MATCH = 15
# What each of redact()'s key-like patterns starts with (any case): a string with none of
# them and no shape of the key is left alone.
_KEY_LIKE_STARTS = ("sk-", "bearer", "x-api-key")


@dataclass
class RecordingSettings:
    """Whether a run records call bodies, and its per-slot cap (MiB of compressed bytes)."""

    bodies: bool = True
    max_recorded_mb: float = DEFAULT_MAX_RECORDED_MB

    def to_manifest(self) -> dict[str, Any]:
        return {"bodies": self.bodies, "max_recorded_mb": self.max_recorded_mb}

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> RecordingSettings:
        """The run's settings; a run from before recordings gets the defaults."""
        recorded = manifest.get("recording")
        if not isinstance(recorded, dict):
            return cls()
        cap = recorded.get("max_recorded_mb", DEFAULT_MAX_RECORDED_MB)
        valid = isinstance(cap, (int, float)) and not isinstance(cap, bool)
        return cls(
            bodies=recorded.get("bodies") is not False,
            max_recorded_mb=float(cap) if valid else DEFAULT_MAX_RECORDED_MB,
        )

    @property
    def max_bytes(self) -> int:
        """The cap in bytes; 0: no cap."""
        return int(self.max_recorded_mb * MIB)


def max_recorded_mb_problem(value: float) -> str | None:
    """Why ``--max-recorded-mb`` cannot take ``value`` (None: it can)."""
    if not math.isfinite(value) or value < 0:
        return f"--max-recorded-mb must be 0 (no cap) or a positive number of MiB, not {value}"
    return None


class CallCapture:
    """One call's bytes as the proxy saw them: the request body (and the JSON object it
    parsed it into, which nobody changes), the answer as sent to the agent (scrubbed,
    bounded) and, for a status >= 400, the scrubbed error body."""

    __slots__ = ("answer", "error", "protocol", "request", "request_json")

    def __init__(
        self, protocol: str | None, request: bytes, request_json: dict[str, Any] | None
    ) -> None:
        self.protocol = protocol
        self.request = request
        self.request_json = request_json
        self.answer = bytearray()
        self.error = b""

    def feed(self, data: bytes) -> None:
        """The proxy's streaming loop calls this per chunk: no parsing here, only a copy."""
        if len(self.answer) < MAX_CAPTURED_BYTES:
            self.answer += data


class ValueRedactor:
    """Redacts decoded JSON values: every string (object keys too) through ``redact`` with
    the secrets, and every shape of a secret ``KeyScrubber`` knows (URL-encoded, any case);
    a string that holds JSON whose own escapes spell a secret is decoded to be redacted.

    ``suspect`` says from a value's JSON text whether the walk can change anything: most
    records hold nothing to mask, and one scan of their text costs far less than a walk."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = [s for s in secrets if s and len(s) >= 4]
        self._scrubbers = [KeyScrubber(s) for s in self.secrets]
        self._shortest = min([_SHORTEST_SECRET_MATCH, *(len(s) for s in self.secrets)])
        # Lowercased, what a string must contain for anything in it to be masked.
        shapes = {shape.lower() for scrubber in self._scrubbers for shape in scrubber.shapes}
        # And every encoding of a secret ``redact`` masks (base64, hex...).
        shapes |= {shape.lower() for s in self.secrets for shape in secret_shapes(s)}
        # Any escape may hide part of a key (the scrubber catches every mix of them), so a
        # string with one is scrubbed too.
        self._telltales = (*_KEY_LIKE_STARTS, *shapes, "\\u", "\\/", "%")
        # The same in JSON text, where a backslash is written twice; and the escapes that make
        # a string's own JSON worth decoding.
        self._telltales_in_json = (
            *{t.replace("\\", "\\\\") for t in self._telltales},
            "\\\\u",
            "\\\\/",
        )

    def suspect(self, json_text: str) -> bool:
        """Whether redacting the value ``json_text`` was dumped from (``ensure_ascii=False``)
        may change it; False means it certainly does not."""
        lowered = json_text.lower()
        if any(telltale in lowered for telltale in self._telltales_in_json):
            return True
        # A secret broken by line breaks or escaped twice: no telltale above is whole.
        return holds_secret(json_text, self.secrets)

    def text(self, text: str) -> str:
        if len(text) < self._shortest:
            return text
        # Most strings hold nothing to mask: substring tests say so, before regexes would.
        lowered = text.lower()
        if any(telltale in lowered for telltale in self._telltales) or holds_secret(
            text, self.secrets
        ):
            for scrubber in self._scrubbers:
                text = scrubber.scrub(text.encode("utf-8", "surrogatepass")).decode(
                    "utf-8", "surrogatepass"
                )
            text = redact(text, self.secrets)
        if ("\\u" in text or "\\/" in text) and text.lstrip()[:1] in ("{", "["):
            text = self._nested_json(text)
        return text

    def _nested_json(self, text: str) -> str:
        """A string holding JSON (tool-call arguments) whose own escapes spell a secret."""
        try:
            inner = json.loads(text)
        except ValueError:
            return text
        cleaned = self.value(inner)
        return text if cleaned == inner else json.dumps(cleaned, ensure_ascii=False)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


@dataclass
class _Call:
    """A call read from its capture (on the I/O thread), waiting to become a record."""

    protocol: str | None
    request: RequestContent | None
    raw_request_bytes: int
    response: dict[str, Any] | None
    error: str | None
    slim: bool = False  # held past the memory bound: only its figures were kept


ValueHash = tuple[int, int]


@dataclass
class _SlotState:
    """What the slot's previous record sent, as hashes: enough to say what this one shares."""

    item_hashes: list[ValueHash] = field(default_factory=list)
    system_hash: ValueHash | None = None
    tools_hash: ValueHash | None = None


def _value_hash(value: Any) -> ValueHash:
    """Equal for equal decoded JSON values (key order included), different otherwise but by a
    chance of 2**-64. Every item of every call is hashed: marshal (version 2: no
    back-references, so its bytes depend on the value alone) is ten times cheaper than a
    canonical JSON dump, and Python's own (keyed) hash far cheaper than a digest."""
    data = marshal.dumps(value, 2)
    return len(data), hash(data)


def _shared_prefix(previous: list[ValueHash], current: list[ValueHash]) -> int:
    shared = 0
    for before, now in zip(previous, current, strict=False):
        if before != now:
            break
        shared += 1
    return shared


def _slim(record: dict[str, Any]) -> dict[str, Any]:
    """A record past the cap: its figures, without the conversation's or the answer's text."""
    request = {k: v for k, v in record["request"].items() if k not in ("items", "tools", "system")}
    response = record["response"]
    if response is not None:
        response = {k: v for k, v in response.items() if k not in ("text", "reasoning")}
        response["tool_calls"] = [
            {k: v for k, v in call.items() if k != "arguments"}
            for call in response.get("tool_calls") or []
        ]
    return {**record, "request": request, "response": response, "truncated": True}


def _without_content(call: _Call) -> _Call:
    """A held call past the memory bound: its parameters and figures only."""
    request = call.request
    if request is not None:
        request = RequestContent(items=[], system=None, tools=None, params=request.params)
    response = call.response
    if response is not None:
        response = _slim({"request": {}, "response": response})["response"]
    return _Call(call.protocol, request, call.raw_request_bytes, response, call.error, slim=True)


class _RecordingWriter:
    """The I/O thread's side: reads captures, shares prefixes, applies the cap, appends."""

    def __init__(self, run_dir: Path, redactor: ValueRedactor, max_bytes: int) -> None:
        self.run_dir = Path(run_dir)
        self._redactor = redactor
        self._max_bytes = max_bytes
        self._held_limit = max_bytes * _HELD_PER_CAP if max_bytes else _HELD_UNCAPPED
        self._held: dict[int, tuple[_Call, int]] = {}
        self._held_bytes = 0
        self._deferred_slots: set[tuple[str, int]] = set()
        self._slots: dict[tuple[str, int], _SlotState] = {}
        self._touched: set[Path] = set()  # files this process has checked (and appended to)
        # The open recording of each slot whose attempt is open: (fd, size).
        self._files: dict[tuple[str, int], tuple[int, int]] = {}

    # --- reading a capture -------------------------------------------------------------------

    def read(self, capture: CallCapture, status: int | None, streamed: bool) -> _Call:
        protocol = capture.protocol if capture.protocol in MODEL_PROTOCOLS else None
        request = request_content(protocol, capture.request_json) if protocol else None
        response = None
        if protocol and status is not None and 200 <= status < 300:
            response = answer_content(protocol, bytes(capture.answer), streamed)
        error = self._error_text(capture.error) if status is not None and status >= 400 else None
        return _Call(protocol, request, len(capture.request), response, error)

    def _error_text(self, body: bytes) -> str:
        """The error body (already scrubbed as bytes) redacted as values, first 2 KiB."""
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            decoded = json.loads(body)
            cleaned = self._redactor.value(decoded)
            if cleaned != decoded:  # an escaped key: the body is stored re-encoded, masked
                body = json.dumps(cleaned, ensure_ascii=False).encode()
        text = body[:_ERROR_TEXT_BYTES].decode("utf-8", "ignore")
        if len(body) > _ERROR_TEXT_BYTES:
            text = self._without_cut_secret(text)
        return self._redactor.text(text)

    def _without_cut_secret(self, text: str) -> str:
        # Cut at 2 KiB, the body may end with the start of a key: drop that tail.
        for secret in self._redactor.secrets:
            for size in range(min(len(secret), len(text)), 3, -1):
                if text.endswith(secret[:size]):
                    return text[:-size]
        return text

    # --- deferred calls ----------------------------------------------------------------------

    def hold(self, key: int, capture: CallCapture, status: int | None, streamed: bool) -> None:
        cost = len(capture.request) + len(capture.answer) + len(capture.error)
        call = self.read(capture, status, streamed)
        if self._held_bytes + cost > self._held_limit:
            call, cost = _without_content(call), 0
        self._held[key] = (call, cost)
        self._held_bytes += cost

    def release(
        self,
        key: int,
        slot: tuple[str, int] | None,
        call_index: int | None,
        rid: Any,
        try_number: int = 1,
    ) -> None:
        held = self._held.pop(key, None)
        if held is None:
            return
        call, cost = held
        self._held_bytes -= cost
        if slot is not None and call_index is not None:
            self._deferred_slots.add(slot)
            self.write(slot, call_index, rid, call, try_number)

    def drop_deferred(self) -> None:
        self._held.clear()
        self._held_bytes = 0
        for slot in self._deferred_slots:
            self.drop_slot(slot)
        self._deferred_slots.clear()

    def drop_slot(self, slot: tuple[str, int]) -> None:
        self._slots.pop(slot, None)
        self._close(slot)

    def _close(self, slot: tuple[str, int]) -> None:
        opened = self._files.pop(slot, None)
        if opened is not None:
            os.close(opened[0])

    def close_files(self) -> None:
        for slot in list(self._files):
            self._close(slot)

    # --- one record --------------------------------------------------------------------------

    def record(
        self,
        slot: tuple[str, int],
        call: _Call,
        call_index: int,
        rid: Any,
        *,
        slim: bool = False,
        try_number: int = 1,
    ) -> dict[str, Any]:
        """The call's record (``slim``: past the cap, see ``_slim``); the slot's state becomes
        this call's."""
        slim = slim or call.slim
        record: dict[str, Any] = {
            "v": RECORD_VERSION,
            "call_index": call_index,
            "try": try_number,
            "request_id": rid,
            "protocol": call.protocol,
            "request": {"raw_request_bytes": call.raw_request_bytes},
            "response": call.response,
            "truncated": False,
            "error": call.error,
        }
        if call.request is None:
            # Nothing to share with the next call: it starts afresh (base 0, system, tools).
            self._slots.pop(slot, None)
            if call.protocol is not None:  # a body that is not JSON: no items to read
                record["request"].update(base=0, items=[], system=None, tools=None, params={})
        else:
            record["request"] = self._shared(slot, call.request)
        return _slim(record) if slim else record

    def _shared(self, slot: tuple[str, int], request: RequestContent) -> dict[str, Any]:
        previous = self._slots.get(slot)
        hashes = [_value_hash(item) for item in request.items]
        system_hash = _value_hash(request.system)
        tools_hash = _value_hash(request.tools)
        base = _shared_prefix(previous.item_hashes, hashes) if previous else 0
        shared: dict[str, Any] = {"base": base, "items": request.items[base:]}
        if previous is not None and previous.system_hash == system_hash:
            shared["system_same"] = True
        else:
            shared["system"] = request.system
        if previous is not None and previous.tools_hash == tools_hash:
            shared["tools_same"] = True
        else:
            shared["tools"] = request.tools
        shared["params"] = request.params
        self._slots[slot] = _SlotState(hashes, system_hash, tools_hash)
        return shared

    def write(
        self, slot: tuple[str, int], call_index: int, rid: Any, call: _Call, try_number: int = 1
    ) -> None:
        fd, size = self._files.get(slot) or self._open(slot)
        capped = self._max_bytes > 0
        record = self.record(
            slot,
            call,
            call_index,
            rid,
            slim=capped and size >= self._max_bytes,
            try_number=try_number,
        )
        line = _json_line(record)
        if self._redactor.suspect(line):  # rarely: only then is every string walked
            record = self._redactor.value(record)
            line = _json_line(record)
        member = gzip_member(line)
        if capped and not record["truncated"] and size + len(member) > self._max_bytes:
            member = gzip_member(_json_line(_slim(record)))
        try:
            append_member(fd, member, size)
        except OSError:
            self._files[slot] = (fd, size)
            self._close(slot)  # reopened (its size read again) by the next record
            raise
        self._files[slot] = (fd, size + len(member))
        if slot in self._deferred_slots:
            self._close(slot)  # attributed one by one, over many slots: not kept open

    def _open(self, slot: tuple[str, int]) -> tuple[int, int]:
        path = attempt_file(self.run_dir, *slot, RECORDING_SUFFIX)
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            size = os.fstat(fd).st_size
            if path not in self._touched:
                size = cut_torn_tail(fd, path, size)
                self._touched.add(path)
        except BaseException:
            os.close(fd)
            raise
        return fd, size


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


Job = Callable[[], None]


class CallRecorder:
    """The proxy's side, on the event loop: each method queues a job and has ``submit`` (the
    run's I/O thread) run the queue; by default the jobs run at once, as tests may want.

    Jobs run in the order they were queued, in batches: one hand-over to the I/O thread
    serves every call that ended meanwhile. A job that cannot write raises ``OSError`` to
    ``submit``'s owner once its batch is done (the engine stops the run, as for any row it
    cannot write); any other failure loses that one record, logged."""

    def __init__(
        self,
        run_dir: Path,
        real_key: str,
        *,
        max_bytes: int = int(DEFAULT_MAX_RECORDED_MB * MIB),
        submit: Callable[[Job], None] | None = None,
    ) -> None:
        self._writer = _RecordingWriter(run_dir, ValueRedactor([real_key]), max_bytes)
        self._submit = submit or (lambda job: job())
        self._queue: deque[Job] = deque()
        self._lock = threading.Lock()  # the queue and ``_handed_over``, between the threads
        self._handed_over = False  # a batch is waiting for, or running on, the I/O thread
        self._failed = False

    def capture(
        self, protocol: str | None, body: bytes, body_json: dict[str, Any] | None
    ) -> CallCapture:
        return CallCapture(protocol, body, body_json)

    def record(self, row: dict[str, Any], capture: CallCapture, *, held: bool = False) -> None:
        """The call of ``row`` (a calls.jsonl row); ``held``: its slot is not known yet."""
        status, streamed, rid = row["status"], bool(row["streamed"]), row["request_id"]
        writer = self._writer
        if held:
            key = id(row)  # the row lives in its attempt's list until ``attribute`` names it
            self._queue_job(lambda: writer.hold(key, capture, status, streamed))
            return
        slot, index, number = (row["task_id"], row["attempt"]), row["call_index"], _try_of(row)
        self._queue_job(
            lambda: writer.write(slot, index, rid, writer.read(capture, status, streamed), number)
        )

    def attribute(self, row: dict[str, Any]) -> None:
        """A held call's row now names its slot and call_index (or no slot: dropped)."""
        key, rid, index = id(row), row["request_id"], row.get("call_index")
        task_id, attempt = row.get("task_id"), row.get("attempt")
        slot = (task_id, attempt) if task_id is not None and attempt is not None else None
        writer, number = self._writer, _try_of(row)
        self._queue_job(lambda: writer.release(key, slot, index, rid, number))

    def close(self, task_id: str, attempt: int, *, deferred: bool = False) -> None:
        """The attempt's token is closed: its slot's state and open file go (a deferred
        token's: every call still held, and the state of every slot it was attributed to)."""
        writer = self._writer
        if deferred:
            self._queue_job(writer.drop_deferred)
        else:
            self._queue_job(lambda: writer.drop_slot((task_id, attempt)))

    def close_files(self) -> None:
        """The proxy stopped: no more calls, every file closed."""
        self._queue_job(self._writer.close_files)

    def _queue_job(self, job: Job) -> None:
        with self._lock:
            self._queue.append(job)
            if self._handed_over:
                return
            self._handed_over = True
        self._submit(self._run_queue)

    def _run_queue(self) -> None:
        write_error: OSError | None = None
        while True:
            with self._lock:
                if not self._queue:
                    self._handed_over = False
                    break
                job = self._queue.popleft()
            try:
                job()
            except OSError as exc:  # the next jobs still run: a full disk may free up
                write_error = write_error or exc
            except Exception as exc:  # a bug must not stop the run; its message may quote content
                if not self._failed:
                    log.error("a call recording was not written (%s)", type(exc).__name__)
                self._failed = True
        if write_error is not None:
            raise write_error


def _try_of(row: dict[str, Any]) -> int:
    number = row.get("try")
    return number if isinstance(number, int) and not isinstance(number, bool) else 1


def tries_begun(run_dir: Path) -> dict[tuple[str, int], int]:
    """The tries each slot has begun, from its calls.jsonl rows (a row from before tries were
    kept counts as try 1): a resumed run numbers a slot's next try after them."""
    path = Path(run_dir) / CALLS_FILE
    begun: dict[tuple[str, int], int] = {}
    if not path.exists():
        return begun
    for _, row in iter_jsonl(path, []):
        task_id, attempt = row.get("task_id"), row.get("attempt")
        if task_id is None or not isinstance(attempt, int) or isinstance(attempt, bool):
            continue
        slot = (str(task_id), attempt)
        begun[slot] = max(begun.get(slot, 0), _try_of(row))
    return begun


__all__ = [
    "DEFAULT_MAX_RECORDED_MB",
    "CallCapture",
    "CallRecorder",
    "RecordingSettings",
    "ValueRedactor",
    "max_recorded_mb_problem",
    "tries_begun",
]
