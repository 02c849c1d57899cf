"""Checks that explain why a provider switch "does not work", each with a plain fix.

``run_doctor(name)`` is synchronous and may block on the live probe (up to ``timeout``): a face
calls it from a worker thread, or awaits ``probe_endpoint`` itself. No check message ever holds a
key: the key is only sent to the endpoint being probed.

It stays whole (a little past 600 lines): every check and the live probe produce the same
``Check``s for one doctor report, and the probe's checks read the result beside them.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import tomllib
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from driftdesk.providers import locations, status
from driftdesk.providers.harness_env import (
    harness_base_environment,
    pass_env_problem,
    withheld_names,
)
from driftdesk.providers.keys import (
    KeyMissing,
    KeyringUnavailable,
    KeyUnusable,
    backend,
    get_key,
)
from driftdesk.providers.profiles import Profile, ProfileError, ProfileStore
from driftdesk.secrets import redact
from driftdesk.terminal import printable

Level = Literal["ok", "warn", "error"]
SHADOW_PREFIXES = ("ANTHROPIC_", "OPENAI_")


@dataclass
class Check:
    name: str
    level: Level
    message: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProbeResult:
    url: str
    status: int | None  # None: no HTTP answer (timeout, connection refused...)
    latency_ms: float
    model_found: bool | None  # None: the endpoint did not list models
    error: str | None = None  # "timeout" | "connection: ..." when status is None
    redirect_to: str | None = None  # the Location of a 3xx answer (never followed)


def run_doctor(
    profile_name: str | None = None, probe: bool = True, timeout: float = 10.0
) -> list[Check]:
    """All checks for one profile (or every profile when ``profile_name`` is None)."""
    checks: list[Check] = []
    store = ProfileStore()
    problem: Check | None = None
    try:
        profiles = [store.get(profile_name)] if profile_name else store.all()
    except ProfileError as exc:
        problem = Check(
            "profile", "error", str(exc), "driftdesk profile list; driftdesk profile add ..."
        )
        profiles = []
    keyring_ok = _check_keyring(checks, needed=not profiles or not all(p.no_key for p in profiles))
    if problem is not None:
        checks.append(problem)
    if not profiles and not profile_name:
        checks.append(
            Check(
                "profiles", "warn", "no profiles yet", "driftdesk profile add NAME --protocol ..."
            )
        )
    checks.extend(check_shell_env())
    checks.extend(check_codex_config())
    checks.extend(check_codex_project_config())
    checks.extend(check_env_keys())
    checks.extend(check_claude_settings())
    checks.extend(check_drift())
    if not profiles:
        checks.append(check_harness_env())
    for profile in profiles:
        checks.extend(check_base_url(profile))
        checks.append(check_harness_env(profile))
        if profile.no_key:
            checks.append(Check(f"{profile.name}: key", "ok", "keyless profile: no key is sent"))
            key = None
        else:
            key = _check_key(profile, checks) if keyring_ok else None
        if probe and (key or profile.no_key):
            result = probe_endpoint_sync(profile, key, timeout)
            checks.append(probe_check(profile, result))
            client, call = target_probe_label(profile)
            checks.append(
                probe_check(
                    profile,
                    asyncio.run(probe_target(profile, key, timeout)),
                    name=f"{profile.name}: {client} probe ({call})",
                )
            )
            del key
    return checks


def _check_keyring(checks: list[Check], needed: bool = True) -> bool:
    """``needed``: False when every profile checked is keyless, so a missing keyring only
    matters for keyed profiles to come (a warning, not a failure)."""
    try:
        kr = backend()
    except KeyringUnavailable as exc:
        checks.append(
            Check(
                "keyring",
                "error" if needed else "warn",
                str(exc) if needed else f"{exc} (not needed yet: every profile here is keyless)",
                "start a Secret Service (gnome-keyring-daemon or KeePassXC) in your D-Bus "
                "session, or unlock it; driftdesk never stores keys in a file",
            )
        )
        return False
    checks.append(Check("keyring", "ok", f"{type(kr).__module__}.{type(kr).__name__}"))
    return True


def _check_key(profile: Profile, checks: list[Check]) -> str | None:
    try:
        key = get_key(profile.name)
    except KeyMissing as exc:
        checks.append(
            Check(
                f"{profile.name}: key",
                "error",
                str(exc) if isinstance(exc, KeyUnusable) else "no key in the OS keyring",
                f"driftdesk profile edit {profile.name} --key-stdin  (or --prompt-key)",
            )
        )
        return None
    except KeyringUnavailable as exc:
        checks.append(Check(f"{profile.name}: key", "error", str(exc), "unlock the keyring"))
        return None
    checks.append(Check(f"{profile.name}: key", "ok", "present in the OS keyring"))
    return key


def check_base_url(profile: Profile) -> list[Check]:
    name = f"{profile.name}: base URL"
    parts = urlsplit(profile.base_url)
    out: list[Check] = []
    if parts.query or parts.fragment:
        clean = parts._replace(query="", fragment="").geturl()
        out.append(
            Check(
                name,
                "error",
                f"{profile.base_url} has a query string or fragment (often tracking parameters "
                "copied from a link); clients append paths after it and get 404s",
                f"driftdesk profile edit {profile.name} --base-url {clean}",
            )
        )
    path = parts.path.rstrip("/")
    if profile.protocol == "anthropic" and path.endswith("/v1"):
        out.append(
            Check(
                name,
                "warn",
                f"{profile.base_url} ends in /v1 but Anthropic clients add /v1/messages "
                "themselves (the request would go to /v1/v1/messages)",
                f"driftdesk profile edit {profile.name} --base-url "
                f"{parts._replace(path=path[: -len('/v1')], query='', fragment='').geturl()}",
            )
        )
    if profile.protocol == "openai" and not path.endswith("/v1") and "/v1" not in path:
        out.append(
            Check(
                name,
                "warn",
                f"{profile.base_url} has no /v1: OpenAI-compatible clients append /chat/completions "
                "or /responses directly to the base URL",
                "check the provider's docs; most OpenAI-compatible base URLs end in /v1",
            )
        )
    if not out:
        out.append(Check(name, "ok", profile.base_url))
    return out


def check_shell_env(environ: dict[str, str] | None = None) -> list[Check]:
    """Variables exported in this shell beat what a switch writes (names only, never values)."""
    env = os.environ if environ is None else environ
    names = sorted(n for n in env if n.startswith(SHADOW_PREFIXES))
    if not names:
        return [Check("shell environment", "ok", "no ANTHROPIC_* / OPENAI_* variables exported")]
    return [
        Check(
            "shell environment",
            "warn",
            "exported in this shell, these override what driftdesk writes: " + ", ".join(names),
            "unset " + " ".join(names) + "  (and remove them from your shell profile)",
        )
    ]


def check_harness_env(
    profile: Profile | None = None, environ: dict[str, str] | None = None
) -> Check:
    """Which of this shell's variables a harness of a run would receive (the allow-list, plus
    what the profile's ``pass_env`` names) and which it would not: names only, never values."""
    name = f"{profile.name}: harness env" if profile else "harness env"
    patterns = profile.pass_env if profile else []
    problem = pass_env_problem(patterns)
    if problem:
        return Check(name, "error", problem, "fix pass_env in the profile's table of config.toml")
    env = os.environ if environ is None else environ
    passed = sorted(harness_base_environment(patterns, None, env))
    withheld = withheld_names(patterns, env)
    named = f" (the profile passes {', '.join(patterns)})" if patterns else ""
    message = (
        f"a run's harness receives {len(passed)} of this shell's variables{named}: "
        f"{', '.join(passed) or 'none'}; withheld ({len(withheld)}): "
        f"{', '.join(withheld) or 'none'}"
    )
    return Check(
        name,
        "ok",
        printable(message, keep_newlines=False),
        "driftdesk run --pass-env NAME (repeatable, globs too), or pass_env in the profile or "
        "the suite's task, for a variable a harness needs",
    )


def check_codex_config() -> list[Check]:
    path = locations.codex_config_path("user")
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return [Check("codex config", "error", f"{path} does not parse: {exc}", "fix the TOML")]
    out: list[Check] = []
    providers = config.get("model_providers", {})
    if isinstance(providers, dict):
        for pid, table in providers.items():
            if isinstance(table, dict) and table.get("wire_api") == "chat":
                out.append(
                    Check(
                        "codex config",
                        "error",
                        f'[model_providers.{pid}] has wire_api = "chat", which current Codex rejects',
                        'set wire_api = "responses" (the provider must support the Responses API)',
                    )
                )
            if isinstance(table, dict) and "env_key" in table and "auth" in table:
                out.append(
                    Check(
                        "codex config",
                        "warn",
                        f"[model_providers.{pid}] has both env_key and auth; Codex takes one",
                        "remove env_key",
                    )
                )
    if "profiles" in config:
        out.append(
            Check(
                "codex config",
                "warn",
                f"{path} has [profiles.*] tables, which current Codex no longer reads",
                "move each profile to its own <name>.config.toml, or use driftdesk profiles",
            )
        )
    if "profile" in config:
        out.append(
            Check(
                "codex config",
                "warn",
                f"{path} sets a top-level profile = ..., which current Codex ignores",
                "remove it; switch with driftdesk switch NAME --target codex",
            )
        )
    if not out:
        out.append(Check("codex config", "ok", f"{path} has no keys Codex stopped reading"))
    return out


def check_claude_settings() -> list[Check]:
    out: list[Check] = []
    for scope in ("user", "project", "local"):
        path = locations.claude_settings_path(scope)
        try:
            settings = json.loads(path.read_text(encoding="utf-8").lstrip("\ufeff"))
        except FileNotFoundError:
            continue
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            out.append(Check("claude settings", "error", f"{path} does not parse: {why}", ""))
            continue
        env = settings.get("env") if isinstance(settings, dict) else None
        if isinstance(env, dict):
            found = [n for n in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN") if n in env]
            if found:
                out.append(
                    Check(
                        "claude settings",
                        "warn",
                        f"{path} holds {', '.join(found)} in plaintext; it beats apiKeyHelper",
                        f"driftdesk import claude {path} --name NAME --move-key",
                    )
                )
    return out


def check_codex_project_config() -> list[Check]:
    """A project's .codex/config.toml that names a provider: Codex ignores it (since 0.130)."""
    from driftdesk.providers.targets import CODEX_PROJECT_IGNORED

    path = locations.codex_config_path("project")
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    ignored = [key for key in CODEX_PROJECT_IGNORED if key in config]
    if not ignored:
        return []
    return [
        Check(
            "codex project config",
            "warn",
            f"{path} sets {', '.join(ignored)}, which Codex ignores in a project config "
            "(it uses the user config's provider)",
            "pin per launch: driftdesk exec NAME -- codex; or driftdesk switch NAME --target "
            "codex (user scope); an older driftdesk write there: driftdesk restore codex "
            "--scope project --to original",
        )
    ]


def check_env_keys() -> list[Check]:
    """A .env file driftdesk switched that still holds a provider key: tools loading it send
    that key to the endpoint the file now names."""
    from driftdesk.providers.targets import env_key_lines

    out = []
    for row in status.collect_status():
        if row.target != "env" or not row.written_profile:
            continue
        try:
            text = row.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        names = [name for name, _ in env_key_lines(text)]
        if names:
            out.append(
                Check(
                    f"env file {row.path}",
                    "warn",
                    f"holds {', '.join(names)} although driftdesk pointed it at profile "
                    f"{row.written_profile}: tools loading it send that key to the new endpoint",
                    f"driftdesk switch {row.written_profile} --target env --env-file {row.path} "
                    "--move-key",
                )
            )
    return out


def check_drift() -> list[Check]:
    out = []
    for row in status.collect_status():
        if row.drifted:
            out.append(
                Check(
                    f"{row.target} ({row.scope})",
                    "warn",
                    f"{row.path} changed since driftdesk wrote it",
                    "driftdesk status; switch again to re-apply the profile",
                )
            )
    return out


# --- live probe -----------------------------------------------------------------------------


def probe_urls(profile: Profile) -> tuple[str, str]:
    """(models list URL, one-token request URL) for the profile's protocol."""
    base = profile.base_url.rstrip("/")
    if profile.protocol == "anthropic":
        return base + "/v1/models", base + "/v1/messages"
    return base + "/models", base + "/chat/completions"


def _auth_headers(profile: Profile, key: str | None) -> dict[str, str]:
    """The profile's extra headers and its key in the header it names (none when keyless)."""
    headers = dict(profile.headers)
    if profile.protocol == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
    if key is not None:
        headers.update(auth_header_for(profile, key))
    return headers


def auth_header_for(profile: Profile, key: str) -> dict[str, str]:
    """``{"x-api-key": key}`` or ``{"authorization": "Bearer key"}``, as the profile says."""
    return {"x-api-key": key} if profile.auth == "x-api-key" else {"authorization": f"Bearer {key}"}


async def probe_endpoint(profile: Profile, key: str | None, timeout: float = 10.0) -> ProbeResult:
    """List models (falling back to a one-token request) and time it."""
    import aiohttp

    models_url, request_url = probe_urls(profile)
    headers = _auth_headers(profile, key)
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    started = time.perf_counter()
    url = models_url
    try:
        async with aiohttp.ClientSession(timeout=client_timeout) as session:
            # Never follow a redirect: the key would go to wherever it points (aiohttp strips
            # only Authorization across origins, not x-api-key or the profile's headers).
            async with session.get(models_url, headers=headers, allow_redirects=False) as response:
                status_code = response.status
                location = response.headers.get("Location")
                body = await response.read()
            if 300 <= status_code < 400:
                return _redirected(models_url, status_code, started, location, key)
            if status_code == 200:
                return ProbeResult(
                    models_url,
                    200,
                    (time.perf_counter() - started) * 1000,
                    _model_listed(body, profile.model),
                )
            if status_code in (404, 405):
                # No models endpoint: ask for one token instead.
                url = request_url
                payload: dict[str, Any] = {
                    "model": profile.model,
                    "max_tokens": 1,
                    "messages": [{"role": "user", "content": "ping"}],
                }
                started = time.perf_counter()
                return await _post_probe(session, request_url, headers, payload, key)
            return ProbeResult(url, status_code, (time.perf_counter() - started) * 1000, None)
    except (TimeoutError, aiohttp.ClientError) as exc:
        return _probe_failure(url, started, exc, key)


async def _post_probe(
    session: Any, url: str, headers: dict[str, str], payload: dict[str, Any], key: str | None
) -> ProbeResult:
    """One POST, never following a redirect (the key would go wherever it points)."""
    started = time.perf_counter()
    async with session.post(url, headers=headers, json=payload, allow_redirects=False) as response:
        status_code = response.status
        location = response.headers.get("Location")
        await response.read()
    if 300 <= status_code < 400:
        return _redirected(url, status_code, started, location, key)
    return ProbeResult(url, status_code, (time.perf_counter() - started) * 1000, None)


def _probe_failure(url: str, started: float, exc: BaseException, key: str | None) -> ProbeResult:
    """No HTTP answer: a timeout, or a connection error (its text scrubbed of the key)."""
    elapsed = (time.perf_counter() - started) * 1000
    if isinstance(exc, TimeoutError):
        return ProbeResult(url, None, elapsed, None, "timeout")
    message = redact(f"connection: {type(exc).__name__}: {exc}", [key])
    return ProbeResult(url, None, elapsed, None, message)


def _redirected(
    url: str, status_code: int, started: float, location: str | None, key: str | None
) -> ProbeResult:
    from urllib.parse import unquote_plus, urljoin

    # A hostile endpoint may quote the key it was sent in the Location (…/steal?Bearer sk-…),
    # verbatim or URL-encoded: what we show of it is decoded and masked.
    target = redact(unquote_plus(urljoin(url, location)), [key]) if location else None
    return ProbeResult(url, status_code, (time.perf_counter() - started) * 1000, None, None, target)


def redirect_base_url(profile: Profile, result: ProbeResult) -> str | None:
    """The base URL the redirect implies: its Location minus the path the probe appended."""
    if not result.redirect_to:
        return None
    base = profile.base_url.rstrip("/")
    suffix = result.url[len(base) :] if result.url.startswith(base) else ""
    target = urlsplit(result.redirect_to)._replace(query="", fragment="").geturl()
    if suffix and target.endswith(suffix):
        return target[: -len(suffix)]
    return None


def target_probe_label(profile: Profile) -> tuple[str, str]:
    """(the client a profile's target is, the call it makes) — what ``probe_target`` sends."""
    if profile.protocol == "anthropic":
        return "Claude Code", "POST /v1/messages"
    return "Codex", "POST /responses"


async def probe_target(profile: Profile, key: str | None, timeout: float = 10.0) -> ProbeResult:
    """One minimal request to the API the profile's target client uses: Claude Code's
    Messages API (``/v1/messages``), Codex's Responses API (``/responses``). A models list can
    answer while the endpoint the client needs does not."""
    import aiohttp

    base = profile.base_url.rstrip("/")
    if profile.protocol == "anthropic":
        url = base + "/v1/messages"
        payload: dict[str, Any] = {
            "model": profile.model,
            "max_tokens": 1,
            "messages": [{"role": "user", "content": "ping"}],
        }
    else:
        url = base + "/responses"
        payload = {"model": profile.model, "input": "ping", "max_output_tokens": 16}
    started = time.perf_counter()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            return await _post_probe(session, url, _auth_headers(profile, key), payload, key)
    except (TimeoutError, aiohttp.ClientError) as exc:
        return _probe_failure(url, started, exc, key)


def probe_endpoint_sync(profile: Profile, key: str | None, timeout: float = 10.0) -> ProbeResult:
    return asyncio.run(probe_endpoint(profile, key, timeout))


def _model_listed(body: bytes, model: str) -> bool | None:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    items = data.get("data") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return None
    ids = {str(item.get("id")) for item in items if isinstance(item, dict)}
    return model in ids


_ADVICE = {
    401: (
        "the provider rejected the key",
        "set the right key: driftdesk profile edit {name} --key-stdin",
    ),
    403: (
        "the key is valid but not allowed here (model access, region, plan or IP allow-list)",
        "check the account's permissions for this model with the provider",
    ),
    404: (
        "not found: wrong base URL path or an unknown model",
        "check the base URL (a /v1 too many or too few? a query string?) and the model name",
    ),
    429: (
        "rate limited or out of quota",
        "check billing and rate limits with the provider; wait and retry",
    ),
}


def probe_check(profile: Profile, result: ProbeResult, name: str = "") -> Check:
    name = name or f"{profile.name}: live probe"
    where = f"{result.url} in {result.latency_ms:.0f} ms"
    if result.status is None:
        if result.error == "timeout":
            return Check(
                name,
                "error",
                f"no answer from {result.url} within {result.latency_ms / 1000:.1f} s",
                "check the host, port, VPN/proxy and firewall; the server may be overloaded",
            )
        return Check(
            name,
            "error",
            f"could not reach {result.url}: {result.error}",
            "check the base URL's host and port, DNS, and that the server is running",
        )
    if 200 <= result.status < 300:
        if result.model_found is False:
            return Check(
                name,
                "warn",
                f"HTTP {result.status} from {where}, but model {profile.model!r} is not listed",
                f"pick a listed model: driftdesk profile edit {profile.name} --model MODEL",
            )
        found = " (model listed)" if result.model_found else ""
        return Check(name, "ok", f"HTTP {result.status} from {where}{found}")
    if 300 <= result.status < 400:
        host = urlsplit(result.redirect_to).netloc if result.redirect_to else "(no Location)"
        final = redirect_base_url(profile, result)
        return Check(
            name,
            "error",
            f"HTTP {result.status} from {where}: the base URL redirects to {host}: use the final "
            "URL (driftdesk does not follow redirects, so the key is never sent to another place)",
            f"driftdesk profile edit {profile.name} --base-url {final}"
            if final
            else f"find the final URL (the redirect points at {result.redirect_to}) and set it: "
            f"driftdesk profile edit {profile.name} --base-url URL",
        )
    message, fix = _ADVICE.get(
        result.status,
        (
            "server error at the provider" if result.status >= 500 else "unexpected answer",
            "retry later; if it persists, check the provider's status page",
        ),
    )
    return Check(
        name,
        "error",
        f"HTTP {result.status} from {where}: {message}",
        fix.format(name=profile.name),
    )
