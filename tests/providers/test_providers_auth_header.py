"""The header a key travels in is chosen per profile and stored on it; run, exec and doctor agree.

Seen: `exec` of an anthropic profile set only ANTHROPIC_AUTH_TOKEN (the client sent a bearer
token, no x-api-key) while `run` sent x-api-key. Real subprocesses, the real keyring, the real
Claude Code reading the environment `exec` gives it, real HTTP on loopback.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from driftdesk.providers.profiles import ProfileStore

pytestmark = [pytest.mark.keyring, pytest.mark.timeout(300)]

SUITE = '{"task_id": "t1", "prompt": "say p", "expected": {"equals": "p"}}\n'


def _headers(seen: list[dict[str, Any]], suffix: str) -> list[dict[str, str]]:
    return [
        {k.lower(): v for k, v in r["headers"].items()}
        for r in seen
        if r["method"] == "POST" and r["path"].endswith(suffix)
    ]


def _run_once(cli: Callable[..., Any], home: Any, profile: str) -> Any:
    suite = home.project / "suite.jsonl"
    suite.write_text(SUITE)
    return cli(
        "run", "--profile", profile, "--suite", str(suite), "--repeat", "1",
        "--out", str(home.project / "runs"),
    )  # fmt: skip


@pytest.mark.parametrize("auth", ["x-api-key", "bearer"])
def test_exec_run_and_doctor_send_the_key_in_the_profiles_header(
    home: Any, cli: Callable[..., Any], add_profile: Any, provider_server: Any, auth: str
) -> None:
    key = add_profile(
        "an",
        protocol="anthropic",
        base_url=provider_server.base_url,
        model="model-a",
        extra=("--auth-header", auth),
    )
    assert ProfileStore().get("an").auth_header == auth  # stored on the profile
    shown = cli("profile", "show", "an")
    assert ("x-api-key" if auth == "x-api-key" else "Authorization: Bearer") in shown.stdout
    # exec: a child reading the environment the way the Anthropic SDKs and Claude Code do.
    probe = (
        "import os, json; print(json.dumps({k: bool(os.environ.get(k)) for k in "
        "('ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN')}))"
    )
    env = dict(os.environ, ANTHROPIC_API_KEY="sk-stale-shell-key-000000", ANTHROPIC_AUTH_TOKEN="x")
    ran = cli("exec", "an", "--", sys.executable, "-c", probe, env=env)
    assert ran.returncode == 0, ran.stderr
    present = json.loads(ran.stdout)
    assert present == {
        "ANTHROPIC_API_KEY": auth == "x-api-key",
        "ANTHROPIC_AUTH_TOKEN": auth == "bearer",
    }
    # run: the metering proxy sends the real key upstream in the same header.
    provider_server.seen.clear()
    result = _run_once(cli, home, "an")
    assert result.returncode == 0, result.stderr
    upstream = _headers(provider_server.seen, "/v1/messages")
    assert upstream, provider_server.seen
    for headers in upstream:
        if auth == "x-api-key":
            assert headers.get("x-api-key") == key and "authorization" not in headers
        else:
            assert headers.get("authorization") == f"Bearer {key}" and "x-api-key" not in headers
    # doctor: the probe too.
    provider_server.seen.clear()
    assert cli("doctor", "an").returncode == 0
    probed = [{k.lower(): v for k, v in r["headers"].items()} for r in provider_server.seen]
    assert probed
    for headers in probed:
        if auth == "x-api-key":
            assert headers.get("x-api-key") == key and "authorization" not in headers
        else:
            assert headers.get("authorization") == f"Bearer {key}" and "x-api-key" not in headers


def test_exec_of_real_claude_code_sends_the_profiles_header(
    home: Any, cli: Callable[..., Any], add_profile: Any, endpoint: Any
) -> None:
    """Claude Code started through a shell (so exec hands it the environment, not a pin)."""
    from tests.conftest import real_client

    claude = real_client("claude")
    key = add_profile(
        "gw",
        protocol="anthropic",
        base_url=endpoint.base_url,
        model="model-a",
        extra=("--auth-header", "bearer"),
    )
    env = dict(os.environ, HOME=str(home.root), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    env.update(DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1")
    ran = cli(
        "exec", "gw", "--", "sh", "-c", f'exec "{claude}" -p "say p" --max-turns 1',
        env=env, timeout=180,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    calls = _headers(endpoint.seen, "/v1/messages")
    assert calls and all(h.get("authorization") == f"Bearer {key}" for h in calls)
    assert all("x-api-key" not in h for h in calls)


def test_openai_profiles_refuse_x_api_key(home: Any, cli: Callable[..., Any]) -> None:
    result = cli(
        "profile", "add", "o", "--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--auth-header", "x-api-key", "--no-key",
    )  # fmt: skip
    assert result.returncode == 2 and "bearer" in result.stderr
    assert not ProfileStore().exists("o")


def test_keyless_profiles_work_for_run_exec_and_doctor(
    home: Any, cli: Callable[..., Any], provider_server: Any
) -> None:
    added = cli(
        "profile", "add", "local", "--protocol", "openai", "--base-url",
        provider_server.base_url + "/v1", "--model", "model-a", "--no-key",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "keyless" in added.stdout
    assert ProfileStore().get("local").no_key is True
    assert "(keyless)" in cli("profile", "list").stdout
    doctor = cli("doctor", "local")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "keyless" in doctor.stdout
    ran = cli(
        "exec",
        "local",
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ['OPENAI_BASE_URL'])",
    )
    assert ran.returncode == 0 and ran.stdout.strip() == provider_server.base_url + "/v1"
    provider_server.seen.clear()
    result = _run_once(cli, home, "local")
    assert result.returncode == 3, result.stderr  # its one attempt was a link error (below)
    upstream = _headers(provider_server.seen, "/chat/completions")
    assert upstream and all("authorization" not in h and "x-api-key" not in h for h in upstream)
    rows = [
        json.loads(line)
        for line in next(Path(home.project / "runs").rglob("attempts.jsonl"))
        .read_text()
        .splitlines()
    ]
    calls = [
        json.loads(line)
        for line in next(Path(home.project / "runs").rglob("calls.jsonl")).read_text().splitlines()
    ]
    # The call went through without a key: the provider answered 200 (an auth failure is a 401,
    # error_code "401"). This test server's answer lacks a finish_reason, so the attempt itself
    # is a truncation, which `run` reports as a link error (exit 3).
    assert [c["status"] for c in calls] == [200]
    assert len(rows) == 1 and rows[0]["calls"] == 1
    assert (rows[0]["outcome"], rows[0]["error_code"]) == ("link_error", "truncated")


def test_env_switch_that_leaves_the_old_providers_key_warns_and_moves_it(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    from providers_testkit import fresh_key

    add_profile("new", base_url="http://127.0.0.1:8/v1", model="model-b")
    old_key = fresh_key()
    env_file = home.project / ".env"
    original = (
        f"OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_MODEL=old-m\nOPENAI_API_KEY={old_key}\n"
    )
    env_file.write_text(original)
    warned = cli("switch", "new", "--target", "env")
    assert warned.returncode == 0, warned.stderr
    assert "OPENAI_API_KEY (sk-…" + old_key[-4:] + ")" in warned.stderr
    assert "--move-key" in warned.stderr
    doctor = cli("doctor", "--no-probe")
    assert "holds OPENAI_API_KEY" in doctor.stdout and "--move-key" in doctor.stdout
    moved = cli("switch", "new", "--target", "env", "--move-key")
    assert moved.returncode == 0, moved.stderr
    assert "warning" not in moved.stderr
    assert old_key not in env_file.read_text()
    assert "OPENAI_BASE_URL=http://127.0.0.1:8/v1" in env_file.read_text()
    old_profile = [p for p in ProfileStore().all() if p.base_url == "http://127.0.0.1:9/v1"]
    assert len(old_profile) == 1  # the old provider, with its key in the keyring
    assert cli("key", old_profile[0].name).stdout.strip() == old_key
    assert "holds OPENAI_API_KEY" not in cli("doctor", "--no-probe").stdout
    for result in (warned, moved, doctor):
        assert old_key not in result.stdout + result.stderr
    held = [p for p in home.root.rglob("*") if p.is_file() and old_key.encode() in p.read_bytes()]
    assert held == [] and old_key not in env_file.read_text()


def _drop_last_row(run_dir: Path) -> None:
    """What a kill between two attempts leaves: a run whose last slot has no row."""
    rows = (run_dir / "attempts.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "attempts.jsonl").write_text("".join(rows[:-1]))


def test_resume_sends_the_key_as_the_run_did(
    home: Any, cli: Callable[..., Any], add_profile: Any, provider_server: Any
) -> None:
    """Seen: resume rebuilt the profile from the manifest's endpoint and model only, so a
    keyless run's resume asked the keyring for a key it never had, and a bearer gateway's got
    the key as x-api-key."""
    added = cli(
        "profile", "add", "local", "--protocol", "openai", "--base-url",
        provider_server.base_url + "/v1", "--model", "model-a", "--no-key",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    key = add_profile(
        "gw",
        protocol="anthropic",
        base_url=provider_server.base_url,
        model="model-a",
        extra=("--auth-header", "bearer"),
    )
    suite = home.project / "suite.jsonl"
    suite.write_text(SUITE)
    for profile, suffix in (("local", "/chat/completions"), ("gw", "/v1/messages")):
        out = home.project / f"runs-{profile}"
        ran = cli(
            "run", "--profile", profile, "--suite", str(suite), "--repeat", "2",
            "--out", str(out),
        )  # fmt: skip
        assert ran.returncode in (0, 3), ran.stderr
        (run_dir,) = out.iterdir()
        _drop_last_row(run_dir)
        provider_server.seen.clear()
        resumed = cli("resume", str(run_dir))
        assert resumed.returncode in (0, 3), resumed.stderr
        assert "no key for profile" not in resumed.stderr, resumed.stderr
        upstream = _headers(provider_server.seen, suffix)
        assert upstream, (profile, provider_server.seen)
        if profile == "local":
            assert all("authorization" not in h and "x-api-key" not in h for h in upstream)
        else:
            assert all(h.get("authorization") == f"Bearer {key}" for h in upstream)
            assert all("x-api-key" not in h for h in upstream)
        rows = (run_dir / "attempts.jsonl").read_text().splitlines()
        assert len(rows) == 2


def test_keyless_profiles_need_no_keyring_to_be_listed_checked_or_removed(
    home: Any, cli: Callable[..., Any], provider_server: Any
) -> None:
    """Without a keyring: `doctor` failed on `[FAIL] keyring` though no profile has a key, and
    `profile rm` kept a keyless profile "so its key is not orphaned"."""
    from providers_testkit import FAIL_BACKEND, env_with

    no_keyring = env_with(**FAIL_BACKEND)
    for name in ("sim", "sim2"):
        added = cli(
            "profile", "add", name, "--protocol", "openai", "--base-url",
            provider_server.base_url + "/v1", "--model", "model-a", "--no-key", env=no_keyring,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
    doctor = cli("doctor", "sim", "--no-probe", env=no_keyring)
    assert doctor.returncode == 0, doctor.stdout
    assert "[WARN] keyring" in doctor.stdout and "every profile here is keyless" in doctor.stdout
    assert cli("doctor", "--no-probe", env=no_keyring).returncode == 0
    removed = cli("profile", "rm", "sim", "--yes", env=no_keyring)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == "removed profile sim"
    assert ProfileStore().names() == ["sim2"]
    # A keyed profile still needs the keyring, and says so.
    keyed = cli(
        "profile", "add", "keyed", "--protocol", "openai", "--base-url",
        provider_server.base_url + "/v1", "--model", "model-a",
    )  # fmt: skip
    assert keyed.returncode == 0, keyed.stderr
    assert cli("doctor", "--no-probe", env=no_keyring).returncode == 1
    kept = cli("profile", "rm", "keyed", "--yes", env=no_keyring)
    assert kept.returncode == 1 and "not orphaned" in kept.stderr


def test_a_profile_made_keyless_drops_its_stored_key(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    key = add_profile("was-keyed")
    assert cli("key", "was-keyed").stdout.strip() == key
    edited = cli("profile", "edit", "was-keyed", "--no-key")
    assert edited.returncode == 0, edited.stderr
    assert "removed the stored key" in edited.stdout
    handed = cli("key", "was-keyed")
    assert (handed.returncode, handed.stdout) == (0, "no-key\n")
