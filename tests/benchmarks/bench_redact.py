"""What redaction costs a writer: ``redact`` with no secret (the key-like patterns only) vs with
the run's key (every shape of it looked for: verbatim, JSON-escaped at any depth, URL-encoded,
hex, base64/base64url at each alignment, through whitespace and line breaks), side by side,
on what driftdesk redacts most: a log line, 10 KB of prose, a builtin agent's transcript
(indented JSON), a tool result of ``base64`` output (wrapped, no key in it); and the recording
redactor's per-record test (``ValueRedactor.suspect``) on an 8 KB record.

Prints the time per call and the ratio (plus the load average: on a busy machine, compare
ratios, not absolute times).

    .venv-test/bin/python tests/benchmarks/bench_redact.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import timeit
from collections.abc import Callable

from driftdesk.reruns.recording import ValueRedactor
from driftdesk.secrets import redact

KEY = "sk-bench-0123456789abcdefghijklmnop"


def inputs() -> dict[str, str]:
    rng = random.Random(1)
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "while",
        "tests",
        "run",
        "and",
        "sk-",
        "keys",
        "wait",
    ]
    prose = " ".join(rng.choice(words) for _ in range(1800))
    turns = [{"role": "tool", "content": prose[i : i + 500] + "\n$ ls\nREADME.md\n"} for i in range(0, len(prose), 500)]  # fmt: skip
    blob = base64.encodebytes(rng.randbytes(6000)).decode()
    return {
        "log line (60 B)": "[stdout] running step 3 of 10: ok, 42 files checked in 0.3 s",
        "prose, 10 KB": prose,
        "transcript JSON, 9 KB": json.dumps(turns, indent=1, ensure_ascii=False),
        "base64 -w 76, 8 KB": blob,
    }


def per_call(call: Callable[[], object], rounds: int, number: int) -> float:
    """µs per call: the best of ``rounds`` (the least disturbed by other work)."""
    return min(timeit.repeat(call, number=number, repeat=rounds)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    print(f"load average {os.getloadavg()[0]:.2f}")
    for name, text in inputs().items():
        number = 2000 if len(text) < 1000 else 100
        bare = per_call(lambda text=text: redact(text), rounds, number)
        keyed = per_call(lambda text=text: redact(text, [KEY]), rounds, number)
        print(
            f"redact {name:24} no secret {bare:8.1f} µs   with the key {keyed:8.1f} µs   "
            f"ratio {keyed / bare:4.2f}"
        )
    prose = inputs()["prose, 10 KB"]
    record = json.dumps({"request": {"items": [{"content": prose}]}}, ensure_ascii=False)
    redactor = ValueRedactor([KEY])
    suspect = per_call(lambda: redactor.suspect(record), rounds, 200)
    print(f"recording suspect, 10 KB record {suspect:8.1f} µs")


if __name__ == "__main__":
    main()
