"""Object storage in tests: the S3 API served on loopback by moto's standalone server (a real
HTTP server; ``./run tests`` installs ``moto[server]``), one bucket per test, reached by s3fs
through botocore's own chain (``AWS_ENDPOINT_URL`` and the ``AWS_*`` keys in the environment,
as a user's CI sets them)."""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent.parent
for _helpers in ("analysis", "reruns"):
    if str(_TESTS / _helpers) not in sys.path:
        sys.path.append(str(_TESTS / _helpers))

from storage_helpers import ACCESS_KEY, SECRET, Bucket  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        pytest.fail("moto[server] is not installed: ./run tests installs it")
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(home: object, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    """A fresh bucket; the store's credentials in the environment (the standard chain)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    name = f"team-{uuid.uuid4().hex[:10]}"
    fs.mkdir(name)
    return Bucket(name, moto_endpoint, fs)
