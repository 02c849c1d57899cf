"""The proxy's key scrubbing at its edges: the shapes each key character may take, a key with
characters past U+FFFF or a lone surrogate, a body cut inside a key, an answer held back across
chunks, and the error body's encodings. Bodies are written byte by byte; where the proxy is
involved it runs over loopback against a provider that echoes what it is told to."""

from __future__ import annotations

import json
from pathlib import Path

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.proxy import KeyScrubber, MeteringProxy


def test_a_key_with_a_lone_surrogate_is_scrubbed_and_the_proxy_starts_with_it(
    tmp_path: Path,
) -> None:
    # A key read from a non-UTF-8 environment variable holds its bad byte as a surrogate.
    key = "sec\udcffret-value-0123"
    scrubber = KeyScrubber(key)
    escaped = b'{"m": "sec\\udcffret-value-0123"}'
    assert json.loads(escaped)["m"] == key
    assert scrubber.scrub(escaped) == b'{"m": "se\xe2\x80\xa60123"}'
    meter = MeteringProxy(
        run_id="r",
        upstream_base_url="http://127.0.0.1:9/v1",
        protocol="openai",
        real_key=key,
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
    )
    assert meter.run_key != key
