"""The call gate: how many model calls a run has in flight upstream, decided outside the proxy.

The metering proxy (``reruns/proxy.py``) asks the gate for room before every upstream send of a
model call (``driftdesk.wire.MODEL_PROTOCOLS``; never ``/models`` or ``count_tokens``), each
re-send of an absorbed link fault included, and tells it exactly once per ``acquire`` how that
exchange ended: the upstream status and response headers (the provider's rate-limit headers
are read from them), or the error kind of a connection error or timeout (``status`` None), or
``"cancelled"`` when the agent hung up first. Faults injected before the upstream (``--inject``
429/5xx/drop/timeout) are not upstream exchanges and never pass the gate: they say nothing
about the provider's limit. Time spent in ``acquire`` is queueing: the proxy records it apart
from the model's latency (``queue_wait_s`` on the call row).

``endpoint`` is the profile's base URL (scheme://host[:port]/path, no credentials): one limit
per provider endpoint. The adaptive controller (``--concurrency auto``) is one gate; ``None``
(no gate) lets every call through at once, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class CallGate(Protocol):
    async def acquire(self, endpoint: str) -> None:
        """Wait for room for one model call upstream."""
        ...

    def release(
        self,
        endpoint: str,
        status: int | None,
        headers: Mapping[str, str],
        error_kind: str | None,
    ) -> None:
        """The exchange that ``acquire`` let through has ended (once per ``acquire``)."""
        ...
