"""Error bodies in each protocol's shape: the metering proxy's own refusals, the 429s and 5xx
that fault injection answers as a provider would, and the simulated endpoint's errors.
Anthropic Messages wraps its error in ``{"type": "error", "error": {...}}``; the OpenAI
protocols send ``{"error": {"message", "type", "code", ...}}``."""

from __future__ import annotations

import json
from typing import Any


def proxy_error_body(kind: str, message: str) -> dict[str, Any]:
    """The metering proxy's own error (OpenAI's shape, which every client reads)."""
    return {
        "error": {"message": f"driftdesk metering proxy: {message}", "type": kind, "code": kind}
    }


def provider_error_body(kind: str, protocol: str | None) -> bytes:
    """The error a provider sends for ``kind`` (``429``, else a server error), in the wire
    protocol's own shape."""
    if kind == "429":
        message, openai_type, anthropic_type = (
            "Rate limit reached for requests. Please try again later.",
            "rate_limit_error",
            "rate_limit_error",
        )
    else:
        message, openai_type, anthropic_type = (
            "The server had an error while processing your request.",
            "server_error",
            "api_error",
        )
    if protocol == "messages":
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": anthropic_type, "message": message},
        }
    else:
        code = "rate_limit_exceeded" if kind == "429" else None
        body = {"error": {"message": message, "type": openai_type, "param": None, "code": code}}
    return json.dumps(body).encode()


# The simulated endpoint's errors by name: status, OpenAI type, Anthropic type, message, and
# OpenAI's code.
_SIMULATED = {
    "bad_json": (
        400,
        "invalid_request_error",
        "invalid_request_error",
        "body is not a JSON object",
        "bad_json",
    ),
    "rate_limit": (
        429,
        "rate_limit_error",
        "rate_limit_error",
        "Rate limit reached",
        "rate_limit_exceeded",
    ),
    "server_error": (500, "server_error", "api_error", "The server had an error", "server_error"),
    "auth_error": (
        401,
        "invalid_request_error",
        "authentication_error",
        "Incorrect API key",
        "invalid_api_key",
    ),
    "timeout": (504, "timeout", "timeout", "hung and gave up", "timeout"),
}


def simulated_error(name: str, anthropic: bool) -> tuple[int, dict[str, Any]]:
    """The simulated endpoint's error ``name`` (``bad_json``, ``rate_limit``, ``server_error``,
    ``auth_error``, ``timeout``): its status and body, which says it is simulated."""
    status, openai_type, anthropic_type, message, code = _SIMULATED[name]
    if anthropic:
        error = {"type": anthropic_type, "message": f"{message} (simulated)"}
        return status, {"type": "error", "error": error}
    return status, {
        "error": {"message": f"{message} (simulated)", "type": openai_type, "code": code}
    }
