"""What scrubbing 200 answers costs the proxy per chunk: metering alone vs scrub + meter.

Feeds a typical streamed chat answer (200 SSE chunks) and a 64 KiB JSON body through the
proxy's per-chunk path in-process, side by side, and prints the time per chunk and the ratio
(plus the load average: on a busy machine, compare ratios, not absolute times).

    .venv-test/bin/python tests/benchmarks/bench_proxy_scrub.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from driftdesk.reruns.proxy import KeyScrubber, _Passthrough, _UsageMeter

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


def run(chunks: list[bytes], streamed: bool, scrub: bool, rounds: int) -> float:
    scrubber = KeyScrubber(KEY)
    start = time.perf_counter()
    for _ in range(rounds):
        meter = _UsageMeter(streamed=streamed, protocol="chat")
        passthrough = _Passthrough(scrubber, streamed, "", 1 << 30) if scrub else None
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
        meter_only = scrubbed = 0.0
        for _ in range(3):  # alternate, so both see the same machine
            meter_only += run(chunks, streamed, False, rounds)
            scrubbed += run(chunks, streamed, True, rounds)
        print(
            f"{name:5} meter only {meter_only / 3:7.2f} µs/chunk   scrub + meter "
            f"{scrubbed / 3:7.2f} µs/chunk   ratio {scrubbed / meter_only:4.2f}"
        )


if __name__ == "__main__":
    main()
