"""What may go into a page: every string scrubbed, base URLs cut to where they point, and
recorded content dropped when asked (or when the run kept no bodies).

A page leaves the machine: it is mailed, attached to an issue, kept as a CI artifact. So the
redaction is applied to everything written into it, not only to what looks recorded: the
run's own key (the CLI reads it from the keyring and hands it in; analysis never opens the
keyring) in any of the shapes ``driftdesk.secrets.redact`` follows, and anything that looks like
a key. A base URL loses its user, password, query and fragment: a proxy's token often rides
in one of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from driftdesk.secrets import redact

# Recorded text longer than this is cut in the page (the run dir keeps it whole): a page of a
# big run stays small, and a step is read, not archived, here.
MAX_TEXT_CHARS = 4000
DROPPED = "(content left out)"


def safe_url(url: str | None) -> str | None:
    """``url`` without credentials, query or fragment; None stays None. A text that is no URL
    is redacted like any other."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return redact(url.split("?", 1)[0].split("#", 1)[0])
    if not parts.scheme or not host:
        return redact(url.split("?", 1)[0].split("#", 1)[0])
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return redact(urlunsplit((parts.scheme, netloc, parts.path, "", "")))


@dataclass
class Scrubber:
    """Scrubs what a page holds. ``secrets``: values to remove however written (the run's key);
    ``drop_content``: leave prompts, answers and tool arguments out (``--redact-content``, or a
    run recorded with ``--no-bodies``), keeping each step's kind, tool names and sizes."""

    secrets: list[str] = field(default_factory=list)
    drop_content: bool = False

    @classmethod
    def of(cls, secrets: Iterable[str | None] = (), drop_content: bool = False) -> Scrubber:
        return cls([s for s in secrets if s and len(s) >= 4], drop_content)

    def text(self, value: str) -> str:
        return redact(value, self.secrets)

    def value(self, value: Any) -> Any:
        """``value`` with every string in it (keys of mappings too) scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        return value

    def content(self, text: str) -> str:
        """Recorded text (a prompt, an answer, a tool's result or arguments): cut, scrubbed, or
        left out with its size when content is dropped."""
        if self.drop_content:
            return f"{DROPPED}: {len(text)} chars" if text else ""
        text = self.text(text)  # before cutting: a key cut in two is no longer found whole
        if len(text) > MAX_TEXT_CHARS:
            text = text[:MAX_TEXT_CHARS] + f"… (cut: {len(text)} chars in all)"
        return text
