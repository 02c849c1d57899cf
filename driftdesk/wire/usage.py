"""What an answer says about its call, in any of the three protocols: the tokens used (cache
tokens included), the model that answered and its ``system_fingerprint``; and what a request
asked for (its JSON body, its ``model``)."""

from __future__ import annotations

import json
import re
from typing import Any

_DATED_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")


def usage_from(obj: Any, usage: dict[str, Any]) -> None:
    """Fold the usage, served model and fingerprint found in one JSON body or SSE event into
    ``usage`` (Chat Completions, Responses or Messages shapes)."""
    if not isinstance(obj, dict):
        return
    if obj.get("type") == "message_start" and isinstance(obj.get("message"), dict):
        obj = obj["message"]  # Anthropic stream: model and input tokens arrive in message_start
    elif isinstance(obj.get("response"), dict):
        obj = obj["response"]  # Responses stream: response.created / .completed carry it all
    model = obj.get("model")
    if isinstance(model, str) and model:
        usage["served_model"] = model
    fingerprint = obj.get("system_fingerprint")
    if isinstance(fingerprint, str) and fingerprint:
        usage["system_fingerprint"] = fingerprint
    found = obj.get("usage")
    if not isinstance(found, dict):
        return
    prompt = found.get("prompt_tokens", found.get("input_tokens"))
    completion = found.get("completion_tokens", found.get("output_tokens"))
    if isinstance(prompt, int):
        usage["prompt"] = prompt
    if isinstance(completion, int):
        usage["completion"] = completion  # Anthropic message_delta is cumulative: last wins
    total = found.get("total_tokens")
    if isinstance(total, int):
        usage["total"] = total
    details = found.get("prompt_tokens_details") or found.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = found.get("cache_read_input_tokens", cached)
    if isinstance(cached, int):
        usage["cache_read"] = cached
    created = found.get("cache_creation_input_tokens")
    if isinstance(created, int):
        usage["cache_creation"] = created


def models_differ(requested: str | None, served: str | None) -> bool:
    """A served model other than the requested one; a dated snapshot of it is the same."""
    if not requested or not served or served == requested:
        return False
    return not (
        served.startswith(requested) and _DATED_SNAPSHOT.fullmatch(served[len(requested) :])
    )


def json_object(body: bytes) -> dict[str, Any] | None:
    """A request body that is a JSON object, parsed once (for its model, and its recording)."""
    if not body.lstrip().startswith(b"{"):
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def requested_model_of(request: dict[str, Any] | None) -> str | None:
    """The ``model`` a request asked for (JSON bodies only)."""
    model = request.get("model") if request is not None else None
    return model if isinstance(model, str) and model else None
