"""What scrubbing 200 answers costs the proxy per chunk: metering alone vs scrub + meter.

Feeds a typical streamed chat answer (200 SSE chunks) and a 64 KiB JSON body through the
proxy's per-chunk path in-process, side by side, and prints the time per chunk and the ratio
(plus the load average: on a busy machine, compare ratios, not absolute times).

For SSE a third column, ``lines only``, is the scrub the proxy did before it read events
(each whole line's bytes masked, nothing joined across events): what the cross-event scrub
(every event parsed, its text fields scrubbed joined with the ones before, re-encoded) adds
per event is the difference, printed as ``added``.

    .venv-test/bin/python tests/benchmarks/bench_proxy_scrub.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from driftdesk.reruns.key_scrub import KeyScrubber, Passthrough
from driftdesk.reruns.metering import UsageMeter

KEY = "sk-bench-0123456789abcdefghijklmnop"


def sse_chunks() -> list[bytes]:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunks = [
        b"data: "
        + json.dumps({**head, "choices": [{"index": 0, "delta": {"content": "word "}}]}).encode()
        + b"\n\n"
        for _ in range(198)
    ]
    done = {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    chunks.append(b"data: " + json.dumps(done).encode() + b"\n\n")
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def json_chunks() -> list[bytes]:
    body = json.dumps({"model": "m", "text": "x" * 65536, "usage": {"prompt_tokens": 1}}).encode()
    return [body[i : i + 16384] for i in range(0, len(body), 16384)]


class _LinesOnly:
    """The SSE scrub before events were read: whole lines' bytes masked, one at a time."""

    def __init__(self, scrubber: KeyScrubber) -> None:
        self._scrubber = scrubber
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._scrubber.scrub(self._held + chunk)
        cut = data.rfind(b"\n") + 1
        self._held = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        rest, self._held = self._held, b""
        return self._scrubber.scrub(rest)


def run(chunks: list[bytes], streamed: bool, scrub: str, rounds: int) -> float:
    """µs per chunk; ``scrub``: "" (meter only), "lines" (SSE lines only), "all" (the proxy's)."""
    scrubber = KeyScrubber(KEY)
    start = time.perf_counter()
    for _ in range(rounds):
        meter = UsageMeter(streamed=streamed, protocol="chat")
        passthrough: Passthrough | _LinesOnly | None = None
        if scrub == "all":
            passthrough = Passthrough(scrubber, streamed, "", 1 << 30)
        elif scrub == "lines":
            passthrough = _LinesOnly(scrubber)
        for chunk in chunks:
            meter.feed(passthrough.feed(chunk) if passthrough else chunk)
        if passthrough:
            meter.feed(passthrough.flush())
        meter.close()
    return (time.perf_counter() - start) / (rounds * len(chunks)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    rounds = parser.parse_args().rounds
    print(f"load average {os.getloadavg()[0]:.2f}")
    for name, chunks, streamed in (("SSE", sse_chunks(), True), ("JSON", json_chunks(), False)):
        meter_only = lines = scrubbed = 0.0
        for _ in range(3):  # alternate, so all see the same machine
            meter_only += run(chunks, streamed, "", rounds)
            if streamed:
                lines += run(chunks, streamed, "lines", rounds)
            scrubbed += run(chunks, streamed, "all", rounds)
        before = (
            f"lines only {lines / 3:7.2f} µs/chunk (ratio {lines / meter_only:4.2f})   "
            if streamed
            else ""
        )
        added = f"   added {(scrubbed - lines) / 3:6.2f} µs/event" if streamed else ""
        print(
            f"{name:5} meter only {meter_only / 3:7.2f} µs/chunk   {before}scrub + meter "
            f"{scrubbed / 3:7.2f} µs/chunk   ratio {scrubbed / meter_only:4.2f}{added}"
        )


if __name__ == "__main__":
    main()
