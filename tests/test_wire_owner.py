"""The wire protocols have one owner: ``driftdesk.wire`` (issue 47).

What Chat Completions, Responses and Messages bodies look like — their stream events, answer
objects, usage details and error codes — is spelled in that package and nowhere else in the
product, so a fourth protocol touches it alone. Proved on the code: no string constant outside
``driftdesk/wire/`` (docstrings aside) holds one of the protocols' body markers.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("driftdesk", "reruns", "providers", "analysis", "cli", "tui")
# Names only a body of one of the three protocols carries (event types, object types, usage
# details, error codes): none is a column, a path or a word of ours.
BODY_MARKERS = (
    "message_start",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "input_json_delta",
    "response.completed",
    "response.output_text.delta",
    "function_call_output",
    "chat.completion",
    "[DONE]",
    "input_tokens_details",
    "cache_read_input_tokens",
    "rate_limit_exceeded",
)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def body_markers_outside_wire(root: Path) -> list[str]:
    """``path:line marker`` for each string constant outside the wire package that spells a
    protocol's body marker."""
    found = []
    for folder in PRODUCT:
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root)
            if relative.parts[:2] == ("driftdesk", "wire"):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = _docstrings(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Constant) or id(node) in docstrings:
                    continue
                value = node.value
                if isinstance(value, bytes):
                    value = value.decode("latin-1")
                if not isinstance(value, str):
                    continue
                found.extend(f"{relative}:{node.lineno} {m}" for m in BODY_MARKERS if m in value)
    return found


def test_only_the_wire_package_spells_the_protocols_bodies() -> None:
    assert body_markers_outside_wire(ROOT) == []


def test_the_wire_package_spells_each_marker() -> None:
    # The check above can fail: every marker is really spelled, in the wire package.
    wire = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "driftdesk/wire").rglob("*.py"))
    assert [m for m in BODY_MARKERS if m not in wire] == []
