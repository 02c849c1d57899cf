"""What an attempt's proxied calls say about it: whether its last call left the link broken
(so a judged pass or fail cannot have come from the model), the figures an attempt row takes
from its calls, and the error kind of a failed call. The proxy writes the calls; the tries
(local, Ray), the agents and the inspect harness judge by them here."""

from __future__ import annotations

from typing import Any

# Error kinds of a call that mean the link failed (not the harness's request): a harness whose
# last call ended so cannot have its answer from the model.
_LINK_FAILURE_KINDS = frozenset(
    {
        "truncated",
        "connection",
        "timeout",
        "insufficient_quota",
        "invalid_sse",
        "redirect",
        "too_large",
        "401",
        "403",
        "404",
        "408",
        "429",
    }
)


def unrecovered_link_failure(calls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The attempt's last call when it ended in a link failure (cut short, refused, 5xx...):
    whatever answer the harness made of it did not come from the model."""
    if not calls:
        return None
    last = calls[-1]
    kind = last.get("error_kind")
    if not kind:
        return None
    kind = str(kind)
    if kind in _LINK_FAILURE_KINDS or (kind.isdigit() and 500 <= int(kind) <= 599):
        return last
    return None


def link_failure_verdict(outcome: str, calls: list[dict[str, Any]]) -> tuple[str, str] | None:
    """``(error_code, message)`` when a judged outcome (pass/fail) came through an unrecovered
    link failure and so must be a ``link_error``, whatever the harness concluded."""
    if outcome not in ("pass", "fail"):
        return None
    failed = unrecovered_link_failure(calls)
    if failed is None:
        return None
    kind = str(failed["error_kind"])
    return kind, (
        f"the attempt's last provider call {failed.get('path')} failed ({kind}); "
        f"the harness reported {outcome} on a broken link"
    )


def call_figures(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An attempt row's figures from its proxied calls: served-model mismatches, and the
    model's own latency (the sum of its answered calls'), apart from the attempt's wall time.
    A run that absorbs link faults (its rows say ``absorbed``) adds how many were absorbed
    and the waits they cost (inside the wall time, not the model's latency)."""
    answered = [c for c in calls if not c.get("absorbed")]
    figures: dict[str, Any] = {
        "model_mismatches": sum(1 for c in answered if c.get("model_mismatch")),
        "model_latency_ms": round(sum(float(c.get("latency_ms") or 0.0) for c in answered), 3),
    }
    if any("absorbed" in c for c in calls):
        absorbed = [c for c in calls if c.get("absorbed")]
        figures["absorbed_faults"] = len(absorbed)
        figures["absorbed_wait_s"] = round(sum(float(c.get("wait_s") or 0.0) for c in absorbed), 3)
    return figures


def error_kind_for(status: int, body: bytes) -> str:
    """``insufficient_quota`` for a 429 that says so, else the status as a string."""
    if status == 429 and b"insufficient_quota" in body:
        return "insufficient_quota"
    return str(status)
