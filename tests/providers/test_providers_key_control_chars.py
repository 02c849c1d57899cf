"""A key with a newline, CR or NUL can be sent in no HTTP header: it is refused when given,
and one an older version stored is named in one line when used, never sent, never blamed on
the provider. Real CLI, real keyring, a real provider server on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from providers_testkit import ProviderServer

from driftdesk.providers.keys import backend, service_name
from driftdesk.providers.profiles import ProfileStore

pytestmark = pytest.mark.keyring

BAD_KEYS = {
    "newline": "sk-test-0123456789\nabcdef",
    "carriage return": "sk-test-0123456789\r\nX-Evil: 1",
    "NUL": "sk-test-0123\x00456789abcdef",
}


@pytest.mark.parametrize("kind", BAD_KEYS)
def test_a_key_with_a_control_character_is_refused_at_add_and_edit(
    home: Any, cli: Callable[..., Any], kind: str
) -> None:
    bad = BAD_KEYS[kind]
    added = cli(
        "profile", "add", "p", "--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--key-stdin", input=bad,
    )  # fmt: skip
    assert added.returncode != 0
    (line,) = added.stderr.splitlines()
    assert kind in line and "nothing was stored" in line
    assert "sk-test" not in added.stderr + added.stdout  # never echoed
    assert not ProfileStore().exists("p")
    assert backend().get_password(service_name(), "p") is None

    ok = cli(
        "profile", "add", "p", "--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--key-stdin", input="sk-test-good-0123456789",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    edited = cli("profile", "edit", "p", "--key-stdin", input=bad)
    assert edited.returncode != 0
    (line,) = edited.stderr.splitlines()
    assert kind in line and "sk-test" not in line
    assert backend().get_password(service_name(), "p") == "sk-test-good-0123456789"


def test_a_stored_key_with_a_newline_is_one_clear_line_at_use(
    home: Any, cli: Callable[..., Any], provider_server: ProviderServer, tmp_path: Any
) -> None:
    """Seen: every attempt printed an aiohttp traceback and was recorded as link_error '500'
    (blamed on the provider); doctor and exec ended with 'this was not expected'."""
    added = cli(
        "profile", "add", "old", "--protocol", "openai", "--base-url",
        provider_server.base_url + "/v1", "--model", "model-a", "--key-stdin",
        input="sk-test-placeholder-0123456789",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    # as an older driftdesk stored it
    backend().set_password(service_name(), "old", BAD_KEYS["newline"])

    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"task_id": "t", "prompt": "hi", "expected": {"equals": "x"}}))
    uses = {
        "doctor": cli("doctor", "old"),
        "exec": cli("exec", "old", "--", "true"),
        "key": cli("key", "old"),
    }
    run_argv = ["run", "--profile", "old", "--suite", str(suite), "--repeat", "1"]
    uses["run"] = cli(*run_argv, "--out", str(tmp_path / "runs"), timeout=120)
    for name, done in uses.items():
        text = done.stdout + done.stderr
        assert done.returncode != 0, name
        assert "Traceback" not in text and "not expected" not in text, (name, text)
        assert "a newline" in text and "profile edit old --key-stdin" in text, (name, text)
        assert "sk-test-0123456789" not in text, name
    assert provider_server.seen == []  # the key was never sent
    assert not list((tmp_path / "runs").glob("*/attempts.jsonl"))  # no attempt blamed on it
