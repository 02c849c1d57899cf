"""Call recordings: what each provider call of an attempt said, kept beside its other files as
``attempts/<task folder>/<attempt>.calls.jsonl.gz`` (format: docs/ARCHITECTURE.md, "Call
recordings").

One gzip member per call, each one JSON record: the request's conversation items after those
it shares with the slot's previous call (``base``), its system prompt and tools unless
unchanged, its other parameters, and the answer reassembled (``call_content``). Every string
stored is redacted after JSON decoding, so a key the upstream escaped in any way is masked.

The proxy hands each call's bytes to ``CallRecorder`` on the event loop; reading them,
redacting, compressing and writing run as jobs on the run's single I/O thread, in submission
order (so a slot's records are written in call order, and all the per-slot state below is
touched by that thread only). A slot's file stops taking content at its cap: further records
keep only their figures and say ``"truncated": true``.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import json
import logging
import math
import os
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.layout import RECORDING_SUFFIX, attempt_file
from driftdesk.reruns.call_content import (
    RECORDED_PROTOCOLS,
    RequestContent,
    answer_content,
    request_content,
)
from driftdesk.reruns.proxy import KeyScrubber
from driftdesk.secrets import redact

log = logging.getLogger(__name__)

RECORD_VERSION = 1
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
    """One call's bytes as the proxy saw them: the request body, the answer as sent to the
    agent (scrubbed, bounded) and, for a status >= 400, the scrubbed error body."""

    __slots__ = ("answer", "error", "protocol", "request")

    def __init__(self, protocol: str | None, request: bytes) -> None:
        self.protocol = protocol
        self.request = request
        self.answer = bytearray()
        self.error = b""

    def feed(self, data: bytes) -> None:
        """The proxy's streaming loop calls this per chunk: no parsing here, only a copy."""
        if len(self.answer) < MAX_CAPTURED_BYTES:
            self.answer += data


class ValueRedactor:
    """Redacts decoded JSON values: every string (object keys too) through ``redact`` with
    the secrets, and every shape of a secret ``KeyScrubber`` knows (URL-encoded, any case)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = [s for s in secrets if s and len(s) >= 4]
        self._scrubbers = [KeyScrubber(s) for s in self.secrets]
        self._shortest = min([_SHORTEST_SECRET_MATCH, *(len(s) for s in self.secrets)])

    def text(self, text: str) -> str:
        if len(text) < self._shortest:
            return text
        for scrubber in self._scrubbers:
            if scrubber.found(text):
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


@dataclass
class _SlotState:
    """What the slot's previous record sent, as hashes: enough to say what this one shares."""

    item_hashes: list[bytes] = field(default_factory=list)
    system_hash: bytes | None = None
    tools_hash: bytes | None = None


def _canonical_hash(value: Any) -> bytes:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _shared_prefix(previous: list[bytes], current: list[bytes]) -> int:
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


def whole_members_end(data: bytes) -> int:
    """Where the last whole gzip member of ``data`` ends (a torn tail starts there)."""
    view = memoryview(data)
    end = 0
    while end < len(data):
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        at = end
        try:
            while not inflate.eof and at < len(data):
                piece = view[at : at + 65536]
                inflate.decompress(piece)
                at += len(piece)
        except zlib.error:
            break
        if not inflate.eof:
            break
        end = at - len(inflate.unused_data)
    return end


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

    # --- reading a capture -------------------------------------------------------------------

    def read(self, capture: CallCapture, status: int | None, streamed: bool) -> _Call:
        protocol = capture.protocol if capture.protocol in RECORDED_PROTOCOLS else None
        request = request_content(protocol, capture.request) if protocol else None
        response = None
        if protocol and status is not None and 200 <= status < 300:
            response = answer_content(protocol, bytes(capture.answer), streamed)
            if response is not None:
                response = self._redactor.value(response)
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

    def release(self, key: int, slot: tuple[str, int] | None, call_index: int | None, rid: Any):
        held = self._held.pop(key, None)
        if held is None:
            return
        call, cost = held
        self._held_bytes -= cost
        if slot is not None and call_index is not None:
            self._deferred_slots.add(slot)
            self.write(slot, call_index, rid, call)

    def drop_deferred(self) -> None:
        self._held.clear()
        self._held_bytes = 0
        for slot in self._deferred_slots:
            self._slots.pop(slot, None)
        self._deferred_slots.clear()

    def drop_slot(self, slot: tuple[str, int]) -> None:
        self._slots.pop(slot, None)

    # --- one record --------------------------------------------------------------------------

    def record(
        self, slot: tuple[str, int], call: _Call, call_index: int, rid: Any, *, slim: bool = False
    ) -> dict[str, Any]:
        """The call's record (``slim``: past the cap, see ``_slim``); the slot's state becomes
        this call's."""
        slim = slim or call.slim
        record: dict[str, Any] = {
            "v": RECORD_VERSION,
            "call_index": call_index,
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
            record["request"] = self._shared(slot, call.request, slim)
        return _slim(record) if slim else record

    def _shared(self, slot: tuple[str, int], request: RequestContent, slim: bool) -> dict[str, Any]:
        previous = self._slots.get(slot)
        hashes = [_canonical_hash(item) for item in request.items]
        system_hash = _canonical_hash(request.system)
        tools_hash = _canonical_hash(request.tools)
        base = _shared_prefix(previous.item_hashes, hashes) if previous else 0
        # Past the cap the content is not stored: no need to redact it.
        value = (lambda v: None) if slim else self._redactor.value
        shared: dict[str, Any] = {"base": base, "items": value(request.items[base:])}
        if previous is not None and previous.system_hash == system_hash:
            shared["system_same"] = True
        else:
            shared["system"] = value(request.system)
        if previous is not None and previous.tools_hash == tools_hash:
            shared["tools_same"] = True
        else:
            shared["tools"] = value(request.tools)
        shared["params"] = self._redactor.value(request.params)
        self._slots[slot] = _SlotState(hashes, system_hash, tools_hash)
        return shared

    def write(self, slot: tuple[str, int], call_index: int, rid: Any, call: _Call) -> None:
        path = attempt_file(self.run_dir, slot[0], slot[1], RECORDING_SUFFIX)
        if path not in self._touched:
            path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            size = os.fstat(fd).st_size
            if path not in self._touched:
                size = self._cut_torn_tail(fd, path, size)
                self._touched.add(path)
            capped = self._max_bytes > 0
            record = self.record(
                slot, call, call_index, rid, slim=capped and size >= self._max_bytes
            )
            member = _member(record)
            if capped and not record["truncated"] and size + len(member) > self._max_bytes:
                member = _member(_slim(record))
            _append(fd, member, size, path)
        finally:
            os.close(fd)

    @staticmethod
    def _cut_torn_tail(fd: int, path: Path, size: int) -> int:
        """A file left by an earlier process may end in a torn member (it was killed while
        writing): cut it off, so the records appended after it stay readable."""
        if size == 0:
            return 0
        with open(path, "rb") as fh:
            end = whole_members_end(fh.read())
        if end < size:
            os.ftruncate(fd, end)
        return end


def _member(record: dict[str, Any]) -> bytes:
    """One record as one gzip member: a JSON line."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
    return gzip.compress(line.encode("utf-8", "surrogatepass"), compresslevel=6, mtime=0)


def _append(fd: int, member: bytes, start: int, path: Path) -> None:
    """One write per record on an O_APPEND fd; a write that fails or lands only in part is cut
    off again (the file never ends in a member this process tore)."""
    try:
        written = os.write(fd, member)
        if written != len(member):
            raise OSError(errno.ENOSPC, f"short write: {written} of {len(member)} bytes", str(path))
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


Job = Callable[[], None]


class CallRecorder:
    """The proxy's side (on the event loop): every method only hands a job to ``submit`` (the
    run's I/O thread; by default the job runs at once, as tests and benchmarks may want).

    A job that fails to write raises ``OSError`` to ``submit``'s owner (the engine stops the
    run, as for any row it cannot write); any other failure loses that one record, logged."""

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
        self._failed = False

    def capture(self, protocol: str | None, body: bytes) -> CallCapture:
        return CallCapture(protocol, body)

    def record(self, row: dict[str, Any], capture: CallCapture, *, held: bool = False) -> None:
        """The call of ``row`` (a calls.jsonl row); ``held``: its slot is not known yet."""
        status, streamed, rid = row["status"], bool(row["streamed"]), row["request_id"]
        writer = self._writer
        if held:
            key = id(row)  # the row lives in its attempt's list until ``attribute`` names it
            self._submit(self._guarded(lambda: writer.hold(key, capture, status, streamed)))
            return
        slot, index = (row["task_id"], row["attempt"]), row["call_index"]

        def job() -> None:
            writer.write(slot, index, rid, writer.read(capture, status, streamed))

        self._submit(self._guarded(job))

    def attribute(self, row: dict[str, Any]) -> None:
        """A held call's row now names its slot and call_index (or no slot: dropped)."""
        key, rid, index = id(row), row["request_id"], row.get("call_index")
        task_id, attempt = row.get("task_id"), row.get("attempt")
        slot = (task_id, attempt) if task_id is not None and attempt is not None else None
        writer = self._writer
        self._submit(self._guarded(lambda: writer.release(key, slot, index, rid)))

    def close(self, task_id: str, attempt: int, *, deferred: bool = False) -> None:
        """The attempt's token is closed: its slot's state goes (a deferred token's: every
        call still held, and the state of every slot it was attributed to)."""
        writer = self._writer
        if deferred:
            self._submit(writer.drop_deferred)
        else:
            self._submit(lambda: writer.drop_slot((task_id, attempt)))

    def _guarded(self, job: Job) -> Job:
        def run() -> None:
            try:
                job()
            except OSError:
                raise
            except Exception as exc:  # a bug must not stop the run; its message may quote content
                if not self._failed:
                    log.error("a call recording was not written (%s)", type(exc).__name__)
                self._failed = True

        return run


__all__ = [
    "DEFAULT_MAX_RECORDED_MB",
    "CallCapture",
    "CallRecorder",
    "RecordingSettings",
    "ValueRedactor",
    "max_recorded_mb_problem",
    "whole_members_end",
]
