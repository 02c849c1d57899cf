"""One self-contained HTML file: the skeleton (``page.html``), its style and script inlined, the
data as a JSON block, and a Content-Security-Policy that allows nothing but those.

- The CSP (a ``<meta>`` at the top of ``<head>``) names the page's own script and style by
  their SHA-256: no other script runs, not even one smuggled into recorded text, and
  ``default-src 'none'`` forbids every fetch (images only as ``data:``, for the plots).
- The data is JSON inside ``<script type="application/json">``, which the browser never runs;
  ``<``, ``>``, ``&`` and the JavaScript line separators are written as ``\\u`` escapes, so no
  ``</script>`` or ``<!--`` in recorded text can end the block. The script reads it with
  ``JSON.parse`` and puts every text into the page as text (``textContent``), never as markup.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html import escape
from importlib import resources
from typing import Any

HEADLINE_MARK = "driftdesk-headline"  # the performance mark set once the headline is parsed
MARK_SCRIPT = f'performance.mark("{HEADLINE_MARK}")'
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_UNSAFE = re.compile("[<>&\u2028\u2029]")
_SLOT = re.compile(r"\{\{(\w+)\}\}")


def asset(name: str) -> str:
    return resources.files("driftdesk.analysis.page").joinpath(name).read_text(encoding="utf-8")


def embedded_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _JSON_UNSAFE.sub(lambda m: _JSON_ESCAPES[m.group()], text)


def _sha256(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def content_security_policy(scripts: list[str], styles: list[str]) -> str:
    return "; ".join(
        [
            "default-src 'none'",
            "script-src " + " ".join(_sha256(s) for s in scripts),
            "style-src " + " ".join(_sha256(s) for s in styles),
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )


def render(*, title: str, kind: str, body: str, data: dict[str, Any]) -> str:
    """The whole page. ``body``: the static HTML (already escaped) shown before any script."""
    script = asset("page.js")
    style = asset("page.css")
    slots = {
        "csp": escape(content_security_policy([MARK_SCRIPT, script], [style]), quote=True),
        "title": escape(title),
        "kind": escape(kind, quote=True),
        "style": style,
        "body": body,
        "mark": MARK_SCRIPT,
        "data": embedded_json(data),
        "script": script,
    }
    # One pass over the skeleton: a slot's value is never searched for slots itself.
    return _SLOT.sub(lambda m: slots[m.group(1)], asset("page.html"))
