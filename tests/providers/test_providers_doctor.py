"""The doctor against a real local provider server and real config files."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from providers_testkit import ProviderServer, fresh_key

from driftdesk.providers import doctor
from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore


def _profile(name: str, base_url: str, protocol: str = "openai", model: str = "model-a") -> Profile:
    profile = Profile(name, protocol, base_url, model)
    ProfileStore().save(profile)
    return profile


def _by_name(checks: list[doctor.Check], suffix: str) -> doctor.Check:
    found = [c for c in checks if c.name.endswith(suffix)]
    assert found, [c.name for c in checks]
    return found[0]


@pytest.mark.parametrize(
    ("mode", "level", "words"),
    [
        ("ok", "ok", "model listed"),
        ("401", "error", "rejected the key"),
        ("403", "error", "not allowed"),
        ("404", "error", "wrong base URL"),
        ("429", "error", "rate limited"),
        ("500", "error", "server error"),
    ],
)
def test_probe_maps_status_to_advice(
    home: Any, provider_server: ProviderServer, mode: str, level: str, words: str
) -> None:
    profile = Profile("p", "openai", provider_server.base_url + "/v1", "model-a")
    key = fresh_key()
    provider_server.mode = mode
    result = doctor.probe_endpoint_sync(profile, key, timeout=5)
    assert result.status == (200 if mode == "ok" else int(mode))
    assert result.latency_ms > 0
    check = doctor.probe_check(profile, result)
    assert check.level == level
    assert words in check.message + check.fix
    assert key not in check.message + check.fix
    request = provider_server.seen[0]
    assert request["path"] == "/v1/models"
    assert request["headers"]["Authorization"] == f"Bearer {key}"


def test_probe_unknown_model_is_a_warning(home: Any, provider_server: ProviderServer) -> None:
    profile = Profile("p", "openai", provider_server.base_url + "/v1", "not-served")
    result = doctor.probe_endpoint_sync(profile, fresh_key(), timeout=5)
    assert result.model_found is False
    check = doctor.probe_check(profile, result)
    assert check.level == "warn" and "not-served" in check.message


def test_probe_falls_back_to_one_token_request(home: Any, provider_server: ProviderServer) -> None:
    provider_server.mode = "no-models"
    profile = Profile("p", "anthropic", provider_server.base_url, "model-a")
    key = fresh_key()
    result = doctor.probe_endpoint_sync(profile, key, timeout=5)
    assert result.status == 200 and result.model_found is None
    assert [r["path"] for r in provider_server.seen] == ["/v1/models", "/v1/messages"]
    sent = provider_server.seen[1]
    assert sent["headers"]["x-api-key"] == key
    assert json.loads(sent["body"])["max_tokens"] == 1


def test_probe_timeout_and_refused_connection(home: Any, provider_server: ProviderServer) -> None:
    provider_server.mode = "hang"
    profile = Profile("p", "openai", provider_server.base_url + "/v1", "model-a")
    result = doctor.probe_endpoint_sync(profile, fresh_key(), timeout=0.5)
    assert result.status is None and result.error == "timeout"
    check = doctor.probe_check(profile, result)
    assert check.level == "error" and "no answer" in check.message
    closed = Profile("p", "openai", "http://127.0.0.1:1/v1", "model-a")
    refused = doctor.probe_check(closed, doctor.probe_endpoint_sync(closed, fresh_key(), 5))
    assert refused.level == "error" and "could not reach" in refused.message


@pytest.mark.parametrize(("protocol", "methods"), [("openai", ("GET",)), ("anthropic", ("POST",))])
def test_probe_never_follows_a_redirect(
    home: Any,
    provider_server: ProviderServer,
    second_server: ProviderServer,
    protocol: str,
    methods: tuple[str, ...],
) -> None:
    # The first server redirects to the second (the one-token request too, when the models list
    # is missing); the second records every header it gets and must never see the key.
    provider_server.redirect_to = second_server.base_url + "/elsewhere"
    provider_server.redirect_methods = methods
    if methods == ("POST",):
        provider_server.mode = "no-models"
    base = provider_server.base_url + ("/v1" if protocol == "openai" else "")
    profile = Profile("p", protocol, base, "model-a")
    key = fresh_key()
    result = doctor.probe_endpoint_sync(profile, key, timeout=5)
    assert result.status == 307
    assert provider_server.seen, "the probe must reach the first server"
    assert second_server.seen == []
    check = doctor.probe_check(profile, result)
    host = second_server.base_url.removeprefix("http://")
    assert check.level == "error"
    assert f"redirects to {host}: use the final URL" in check.message
    assert check.fix.endswith(
        f"--base-url {second_server.base_url}/elsewhere" + base[len(provider_server.base_url) :]
    )
    assert key not in check.message + check.fix


@pytest.mark.keyring
def test_doctor_cli_reports_a_redirect_without_sending_the_key_on(
    home: Any,
    provider_server: ProviderServer,
    second_server: ProviderServer,
    cli: Callable[..., Any],
) -> None:
    provider_server.redirect_to = second_server.base_url
    profile = _profile("an", provider_server.base_url, protocol="anthropic")
    key = fresh_key()
    set_key(profile.name, key)
    result = cli("doctor", "an")
    assert result.returncode == 1
    assert "the base URL redirects to 127.0.0.1:" in result.stdout
    assert f"--base-url {second_server.base_url}" in result.stdout
    assert provider_server.seen[0]["headers"]["x-api-key"] == key  # the real probe went out
    assert second_server.seen == []
    assert key not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("protocol", "url", "level", "words"),
    [
        ("openai", "https://api.example.test/v1?utm_source=x", "error", "query string"),
        ("openai", "https://api.example.test/v1#frag", "error", "fragment"),
        ("anthropic", "https://api.example.test/anthropic/v1", "warn", "/v1/messages"),
        ("openai", "https://api.example.test/api", "warn", "no /v1"),
        ("anthropic", "https://api.example.test/anthropic", "ok", "api.example.test"),
        ("openai", "https://api.example.test/v1", "ok", "api.example.test"),
    ],
)
def test_base_url_checks(protocol: str, url: str, level: str, words: str) -> None:
    checks = doctor.check_base_url(Profile("p", protocol, url, "m"))
    assert checks[0].level == level
    assert words in checks[0].message
    if level == "error":
        assert "?" not in checks[0].fix and "#" not in checks[0].fix


def test_shell_shadowing_names_variables_but_never_values() -> None:
    secret = fresh_key()
    checks = doctor.check_shell_env({"OPENAI_API_KEY": secret, "ANTHROPIC_MODEL": "x", "HOME": "/"})
    assert checks[0].level == "warn"
    assert "ANTHROPIC_MODEL, OPENAI_API_KEY" in checks[0].message
    assert secret not in checks[0].message + checks[0].fix
    assert doctor.check_shell_env({"HOME": "/"})[0].level == "ok"


def test_codex_legacy_keys(home: Any) -> None:
    home.codex_config.parent.mkdir(parents=True)
    home.codex_config.write_text(
        'profile = "fast"\n[profiles.fast]\nmodel = "m"\n'
        '[model_providers.old]\nbase_url = "http://x/v1"\nwire_api = "chat"\n'
    )
    messages = " | ".join(c.message for c in doctor.check_codex_config())
    assert 'wire_api = "chat"' in messages
    assert "[profiles.*]" in messages
    assert "top-level profile" in messages


def test_claude_plaintext_key_is_flagged(home: Any) -> None:
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text('{"env": {"ANTHROPIC_API_KEY": "sk-ant-whatever-123456"}}')
    checks = doctor.check_claude_settings()
    assert checks[0].level == "warn" and "ANTHROPIC_API_KEY" in checks[0].message
    assert "sk-ant-whatever" not in checks[0].message


@pytest.mark.keyring
def test_run_doctor_end_to_end(
    home: Any, provider_server: ProviderServer, cli: Callable[..., Any]
) -> None:
    good = _profile("good", provider_server.base_url + "/v1")
    set_key(good.name, fresh_key())
    _profile("keyless", provider_server.base_url + "/v1")
    checks = doctor.run_doctor(probe=True, timeout=5)
    assert _by_name(checks, "keyring").level == "ok"
    assert _by_name(checks, "good: live probe").level == "ok"
    missing = _by_name(checks, "keyless: key")
    assert missing.level == "error" and "--key-stdin" in missing.fix
    assert not any(c.name == "keyless: live probe" for c in checks)
    result = cli("doctor", "good", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    provider_server.mode = "401"
    result = cli("doctor", "good")
    assert result.returncode == 1
    assert "HTTP 401" in result.stdout and "fix: set the right key" in result.stdout


@pytest.mark.keyring
@pytest.mark.parametrize(
    ("protocol", "suffix", "client", "path"),
    [
        ("anthropic", "", "Claude Code", "/v1/messages"),
        ("openai", "/v1", "Codex", "/v1/responses"),
    ],
)
def test_doctor_probes_the_api_each_target_uses(
    home: Any,
    provider_server: ProviderServer,
    cli: Callable[..., Any],
    protocol: str,
    suffix: str,
    client: str,
    path: str,
) -> None:
    profile = Profile("p", protocol, provider_server.base_url + suffix, "model-a")
    ProfileStore().save(profile)
    set_key("p", fresh_key())
    result = cli("doctor", "p")
    assert result.returncode == 0, result.stdout
    assert f"[ok  ] p: {client} probe (POST {path.replace('/v1/responses', '/responses')})" in (
        result.stdout
    )
    assert any(r["method"] == "POST" and r["path"] == path for r in provider_server.seen)
    if protocol == "openai":
        # A gateway with a models list and chat completions but no Responses API: Codex fails
        # there, and doctor says so although the models probe passes.
        provider_server.mode = "chat-only"
        failing = cli("doctor", "p")
        assert failing.returncode == 1
        assert "[ok  ] p: live probe" in failing.stdout
        assert "[FAIL] p: Codex probe (POST /responses): HTTP 404" in failing.stdout


@pytest.mark.keyring
@pytest.mark.parametrize("shape", ["raw", "url-encoded"])
def test_a_redirect_target_that_quotes_the_key_is_shown_masked(
    home: Any,
    provider_server: ProviderServer,
    second_server: ProviderServer,
    cli: Callable[..., Any],
    shape: str,
) -> None:
    # Seen: doctor printed the key inside the redirect target it quoted (…/steal?Bearer sk-live-…).
    from urllib.parse import quote

    key = fresh_key()
    quoted = key if shape == "raw" else quote(key, safe="")
    provider_server.redirect_to = f"{second_server.base_url}/steal?Bearer {quoted}"
    profile = _profile("an", provider_server.base_url, protocol="anthropic")
    set_key(profile.name, key)
    result = cli("doctor", "an")
    assert result.returncode == 1
    assert "redirects to 127.0.0.1:" in result.stdout
    shown = result.stdout + result.stderr
    assert key not in shown and quoted not in shown
    assert key[-4:] in shown  # masked, as keys are shown
