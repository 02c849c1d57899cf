"""Loopback ports the tests share."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections while the block runs: bound but never
    listening, so no other process can take it meanwhile (as it could a port bound and
    released at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
