"""What of the user's environment a harness (the agent under test) receives: an allow-list.

A harness runs the shell commands a model chooses, so it gets what a shell and the client
need, not the user's credentials: ``PATH``, ``HOME``, the user and shell, locale, terminal,
time zone, temporary folder, proxy settings and CA bundles, and a few variables Python and
Node read to run at all. Anything else, an ``AWS_SECRET_ACCESS_KEY``, ``GH_TOKEN`` or
``HF_TOKEN`` included, passes only when the user names it, as tox's ``passenv`` does: ``run
--pass-env NAME`` (a glob such as ``AWS_*`` too), a profile's ``pass_env`` list, a suite task's
``pass_env`` list. Never, even when named: a variable whose value holds the real key, or one
that leads to the keyring (the session bus). The harness then gets the proxy's URL, the run's
throwaway key and the ``DRIFTDESK_*`` variables of its try (``reruns.command_agent``).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

# Names a shell and the clients (Claude Code, Codex: Node; inspect_ai: Python) need.
ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "FORCE_COLOR",
        "COLUMNS",
        "LINES",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        # Proxy settings and CA bundles: a client behind a corporate proxy reaches nothing
        # without them (a proxy URL with a password in it is the user's network setting).
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        # Node (Claude Code, Codex) and Python (inspect_ai, command harnesses) as the user runs
        # them: NODE_AUTH_TOKEN and the like are not among them.
        "NODE_OPTIONS",
        "NODE_PATH",
        "PYTHONPATH",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "VIRTUAL_ENV",
        # Where XDG tools keep their files (paths, not secrets; the keyring's bus is not here:
        # XDG_RUNTIME_DIR holds it).
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
    }
)
ALLOWED_PREFIXES = ("LC_",)  # the locale's categories
# What leads to the OS keyring (the session bus, our service name): never passed, even named.
KEYRING_ACCESS = frozenset(
    {"DBUS_SESSION_BUS_ADDRESS", "DRIFTDESK_KEYRING_SERVICE", "GNOME_KEYRING_CONTROL"}
)
# A name, or a glob of one (``AWS_*``, ``HF_?OKEN``, ``[AB]_KEY``).
_PATTERN = re.compile(r"^[A-Za-z_*?\[][A-Za-z0-9_*?\[\]!]*$")


def pass_env_problem(patterns: Any) -> str | None:
    """Why ``patterns`` is not a list of variable names or globs; None when it is."""
    if isinstance(patterns, str) or not isinstance(patterns, list | tuple):
        return (
            f"pass_env must be a list of variable names (or globs such as AWS_*), not {patterns!r}"
        )
    for pattern in patterns:
        if not isinstance(pattern, str) or not _PATTERN.match(pattern):
            return (
                f"pass_env: {pattern!r} is not a variable name or a glob of one (letters, "
                "digits, _ and the wildcards * ? [...])"
            )
    return None


def is_allowed(name: str) -> bool:
    """Passed to every harness: on the allow-list."""
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def named_by(name: str, patterns: Iterable[str]) -> bool:
    """Whether one of the user's ``pass_env`` patterns names ``name`` (case matters)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def harness_base_environment(
    patterns: Iterable[str] = (),
    real_key: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The part of ``environ`` (ours by default) a harness receives: the allow-list plus what
    ``patterns`` name, minus what leads to the keyring and any value holding ``real_key``."""
    source = os.environ if environ is None else environ
    patterns = tuple(patterns)
    return {
        name: value
        for name, value in source.items()
        if (is_allowed(name) or named_by(name, patterns))
        and name not in KEYRING_ACCESS
        and not (real_key and real_key in value)
    }


def withheld_names(
    patterns: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> list[str]:
    """The names of ``environ`` a harness does not receive (sorted): for ``doctor``."""
    source = os.environ if environ is None else environ
    given = harness_base_environment(patterns, None, source)
    return sorted(name for name in source if name not in given)
