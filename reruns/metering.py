"""Usage metering: what the metering proxy reads of each answer as it streams by — the tokens
(cache tokens included), the model that answered and its fingerprint — and whether the answer
was whole by its protocol's rules (the shapes themselves are ``driftdesk.wire``'s)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from driftdesk.secrets import redact
from driftdesk.wire import ANY_END, END_MARKERS, is_event_payload
from driftdesk.wire.usage import models_differ, usage_from

MAX_METERED_BODY = 16 * 1024 * 1024  # a body is kept (to read its usage) up to this size
# A calls.jsonl row's first fields in the file's order (``request_id`` and each run's optional
# fields follow): the proxy's own and the meter's (``UsageMeter.row_fields``), interleaved.
CALL_ROW_ORDER = (
    "run_id", "task_id", "attempt", "call_index", "try", "method", "path", "status",
    "latency_ms", "ttfb_ms", "streamed", "prompt_tokens", "completion_tokens", "total_tokens",
    "error_kind", "started_at", "cache_read_tokens", "cache_creation_tokens",
    "requested_model", "served_model", "system_fingerprint", "model_mismatch",
)  # fmt: skip


class UsageMeter:
    """Reads one answer as it passes: its usage, served model and fingerprint, whether it
    reached its protocol's end (``finished``) and whether a stream carried something that is
    no event of its protocol (``invalid``)."""

    def __init__(self, streamed: bool, protocol: str | None = None) -> None:
        self.streamed = streamed
        self.protocol = protocol
        self.usage: dict[str, Any] = {
            "prompt": None,
            "completion": None,
            "total": None,
            "cache_read": None,
            "cache_creation": None,
            "served_model": None,
            "system_fingerprint": None,
        }
        self.finished = False  # a stream saw its end marker; a body parsed as whole JSON
        self.invalid = False  # a stream carried a data line that is no event of its protocol
        self.body = bytearray()  # non-streamed bodies (and error bodies), bounded
        self._pending = b""
        self._end = END_MARKERS.get(protocol or "", ANY_END)

    def feed(self, chunk: bytes) -> None:
        if not self.streamed:
            if len(self.body) < MAX_METERED_BODY:
                self.body += chunk
            return
        data = self._pending + chunk
        lines = data.split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if self.protocol in END_MARKERS and not is_event_payload(payload):
            self.invalid = True  # not an event of the protocol: a gateway's page, garbage...
            return
        if self._end.search(line):
            self.finished = True
        # Parse only the events that can hold what we record: the first one naming the model,
        # and those carrying usage (JSON-decoding every delta would cost the loop for nothing).
        if b'"usage"' in line or (self.usage["served_model"] is None and b'"model"' in line):
            with contextlib.suppress(ValueError):
                usage_from(json.loads(line[5:]), self.usage)

    def close(self) -> None:
        if self.streamed:
            if self._pending:
                self._line(self._pending.strip())
                self._pending = b""
            return
        try:
            parsed = json.loads(bytes(self.body))
        except ValueError:
            return
        self.finished = True
        if self.protocol != "count_tokens":  # a token count is not usage, and no model answered
            usage_from(parsed, self.usage)

    def tokens(self) -> tuple[int | None, int | None, int | None]:
        prompt, completion, total = (
            self.usage["prompt"],
            self.usage["completion"],
            self.usage["total"],
        )
        if total is None and prompt is not None and completion is not None:
            total = prompt + completion
        return prompt, completion, total

    def row_fields(self, requested_model: str | None, real_key: str) -> dict[str, Any]:
        """A call row's fields read from the answer (and the requested model beside the
        served one). Decoded strings, redacted after decoding: the bytes were scrubbed of the
        real key, but a key-like value (another key, one the scrubber's shapes miss) decodes
        here."""
        prompt, completion, total = self.tokens()
        keys = [real_key]
        requested = redact(requested_model, keys) if requested_model else requested_model
        served = self.usage["served_model"]
        served = redact(served, keys) if served else served
        fingerprint = self.usage["system_fingerprint"]
        return {
            "streamed": self.streamed,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": total,
            "cache_read_tokens": self.usage["cache_read"],
            "cache_creation_tokens": self.usage["cache_creation"],
            "requested_model": requested,
            "served_model": served,
            "system_fingerprint": redact(fingerprint, keys) if fingerprint else fingerprint,
            "model_mismatch": models_differ(requested, served),
        }


def judged_whole(meter: UsageMeter, headers: dict[str, str]) -> bool:
    """Whether an unfinished ``meter`` means a short answer: every stream must end with its
    protocol's marker; a body only when it is JSON small enough to have been read whole."""
    if meter.streamed:
        return True
    return (
        "json" in (header_value(headers, "content-type") or "")
        and 0 < len(meter.body) < MAX_METERED_BODY
    )


def header_value(headers: dict[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)
