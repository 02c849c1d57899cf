"""Base URLs as users paste them: a tracking query string, or the full endpoint path copied from a
request log. Clients append their own paths, so both end in 404s; say so when the URL is given."""

from __future__ import annotations

from urllib.parse import urlsplit

# Paths a client appends itself: a base URL ending in one was copied from a request.
ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/responses", "/messages")


def cleaned_base_url(url: str) -> tuple[str, str] | None:
    """``(cleaned URL, why)`` when ``url`` carries a query string or fragment, or ends in an
    endpoint path a client appends itself; ``None`` when it looks like a base URL."""
    parts = urlsplit(url)
    reasons = []
    if parts.query or parts.fragment:
        reasons.append("it has a query string (often tracking parameters copied from a link)")
    path = parts.path.rstrip("/")
    for suffix in ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            reasons.append(f"it ends in {suffix}, which clients append themselves")
            break
    if not reasons:
        return None
    return parts._replace(path=path, query="", fragment="").geturl(), "; ".join(reasons)
