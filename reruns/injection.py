"""Fault injection at the metering proxy: which calls get a fault, and what the agent sees.

``--inject 429=5%,500=2%,timeout=1%,truncate=1%,drop=1%,slow=5%:3s`` (or a profile's
``inject = "..."``) makes the proxy answer that share of model calls with the fault instead of
(or on top of) the provider's answer:

- ``429``: a rate-limit error with ``Retry-After`` (``429=5%:2s``: its value; default 1 s);
- ``500`` (any 5xx: ``503=1%``): a server error;
- ``drop``: the connection is closed before any answer;
- ``timeout``: the call hangs past the client's timeout (and the attempt's), then is dropped;
- ``truncate``: forwarded, then the answer is cut halfway (a stream mid-answer) and the
  connection broken;
- ``slow``: forwarded late (``slow=5%:3s``: the first byte comes 3 s later; default 2 s).

The first four never reach the provider (they cost no call). Which calls are hit is decided
from the run's seed and (task, attempt, call index) alone — never from arrival order across
attempts — so a rerun with the same seed hits the same calls at any concurrency.

Accounting (``injection_figures``): an injected fault is *recovered* when a later call of the
same attempt got a whole answer (a ``slow`` call that got its answer recovers itself);
otherwise *surfaced* when the attempt ended unjudged (``link_error``, or ``harness_error``);
otherwise *misattributed*: the attempt was judged pass/fail although its model answer never
arrived — an attribution bug or an agent that hides faults. Expected 0.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from aiohttp import web

from driftdesk.rundir import RunManifest
from driftdesk.wire.errors import provider_error_body

# The kinds in the order their shares are laid out on [0, 1): fixed, so a spec's decisions do
# not depend on how its text was ordered.
NAMED_KINDS = ("429", "timeout", "drop", "truncate", "slow")
BEFORE_UPSTREAM = frozenset({"429", "timeout", "drop"})  # plus every 5xx
DEFAULT_RETRY_AFTER_S = 1.0
DEFAULT_SLOW_S = 2.0
_OFF = frozenset({"none", "off", "no", "0", ""})
_SHARE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(%?)$")
_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(ms|s)?$")
# A spec is kept as whole units, so that its canonical text (plain decimals, never an
# exponent) reads back as exactly the same spec: shares in millionths (0.0001 %, one call in a
# million), durations in milliseconds up to an hour (past that no client is still waiting).
SHARE_UNITS = 1_000_000
MAX_DURATION_S = 3600.0
_MAX_DURATION_MS = int(MAX_DURATION_S * 1000)


class InjectSpecError(ValueError):
    """An ``--inject`` value that cannot be read (the message is one line)."""


def _is_server_error(kind: str) -> bool:
    return kind.isdigit() and len(kind) == 3 and 500 <= int(kind) <= 599


def _share_units(text: str, kind: str) -> int:
    """A share as millionths of the calls (refused when finer, or over 100 %)."""
    match = _SHARE.match(text.strip())
    if match is None:
        raise InjectSpecError(f"--inject {kind}={text!r}: a share is a percentage (5%) or 0..1")
    units = Decimal(match.group(1)) * (SHARE_UNITS // 100 if match.group(2) else SHARE_UNITS)
    if units > SHARE_UNITS:
        raise InjectSpecError(f"--inject {kind}={text}: a share must be between 0% and 100%")
    if 0 < units < 1:
        raise InjectSpecError(
            f"--inject {kind}={text}: the smallest share is 0.0001% (one call in a million)"
        )
    if units != units.to_integral_value():
        raise InjectSpecError(
            f"--inject {kind}={text}: shares have a resolution of 0.0001% "
            "(at most four decimals in percent)"
        )
    return int(units)


def _duration_ms(text: str, kind: str) -> int:
    """A duration in whole milliseconds, at most ``MAX_DURATION_S``."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise InjectSpecError(f"--inject {kind}=...:{text}: a duration is like 3s or 500ms")
    ms = Decimal(match.group(1)) * (1 if match.group(2) == "ms" else 1000)
    if ms > _MAX_DURATION_MS:
        raise InjectSpecError(
            f"--inject {kind}=...:{text}: a duration is at most {MAX_DURATION_S:g}s (an hour)"
        )
    if ms != ms.to_integral_value():
        raise InjectSpecError(f"--inject {kind}=...:{text}: durations have a resolution of 1 ms")
    return int(ms)


def _decimal_text(units: int, per_whole: int) -> str:
    """``units / per_whole`` written in plain decimals, exactly (no exponent, no trailing 0)."""
    whole, part = divmod(units, per_whole)
    if not part:
        return str(whole)
    return f"{whole}.{part:0{len(str(per_whole)) - 1}d}".rstrip("0")


def share_text(share: float) -> str:
    """A share as the spec writes it: ``5%``, ``0.0001%``."""
    return _decimal_text(round(share * SHARE_UNITS), SHARE_UNITS // 100) + "%"


def seconds_text(seconds: float) -> str:
    """A duration as the spec (and a ``Retry-After`` header) writes it: ``3``, ``0.25``."""
    return _decimal_text(round(seconds * 1000), 1000)


@dataclass(frozen=True)
class InjectionSpec:
    """The shares of calls per fault kind, and the two faults' durations."""

    shares: tuple[tuple[str, float], ...]  # (kind, share) in decision order
    retry_after_s: float = DEFAULT_RETRY_AFTER_S
    slow_s: float = DEFAULT_SLOW_S

    @property
    def total(self) -> float:
        return sum(share for _, share in self.shares)

    def text(self) -> str:
        """The canonical spec (what the manifest records, and ``--inject`` reads back)."""
        parts = []
        for kind, share in self.shares:
            part = f"{kind}={share_text(share)}"
            if kind == "429" and self.retry_after_s != DEFAULT_RETRY_AFTER_S:
                part += f":{seconds_text(self.retry_after_s)}s"
            if kind == "slow":
                part += f":{seconds_text(self.slow_s)}s"
            parts.append(part)
        return ",".join(parts)

    def to_manifest(self) -> dict[str, Any]:
        return {
            "spec": self.text(),
            "shares": dict(self.shares),
            "retry_after_seconds": self.retry_after_s,
            "slow_seconds": self.slow_s,
        }

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> InjectionSpec | None:
        """The run's injection (None: the run injects nothing)."""
        recorded = RunManifest.from_json(manifest).injection
        if recorded is None or not recorded.get("spec"):
            return None
        return parse_inject(str(recorded["spec"]))


def _order(kind: str) -> tuple[int, str]:
    """429 first, then the 5xx by code, then the other named kinds."""
    return (1, kind) if _is_server_error(kind) else (2 * NAMED_KINDS.index(kind), "")


def parse_inject(text: str | None) -> InjectionSpec | None:
    """``429=5%,500=2%,slow=5%:3s`` as a spec; None for ``none``/``off`` or nothing."""
    if text is None or text.strip().lower() in _OFF:
        return None
    shares: dict[str, int] = {}  # in SHARE_UNITS
    retry_after_ms, slow_ms = round(DEFAULT_RETRY_AFTER_S * 1000), round(DEFAULT_SLOW_S * 1000)
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        kind, sep, rest = item.partition("=")
        kind = kind.strip().lower()
        if not sep:
            raise InjectSpecError(f"--inject {item!r}: write KIND=SHARE, e.g. 429=5%")
        if kind not in NAMED_KINDS and not _is_server_error(kind):
            raise InjectSpecError(
                f"--inject: unknown fault {kind!r}: use 429, 500 (any 5xx), timeout, truncate, "
                "drop or slow"
            )
        if kind in shares:
            raise InjectSpecError(f"--inject: {kind} is given twice")
        share_part, colon, option = rest.partition(":")
        shares[kind] = _share_units(share_part, kind)
        if colon:
            if kind == "429":
                retry_after_ms = _duration_ms(option, kind)
            elif kind == "slow":
                slow_ms = _duration_ms(option, kind)
            else:
                raise InjectSpecError(
                    f"--inject {item}: only 429 (its Retry-After) and slow (its delay) take :TIME"
                )
    if not shares:
        raise InjectSpecError("--inject: no fault given (e.g. 429=5%,500=2%; none: no faults)")
    total = sum(shares.values())
    if total > SHARE_UNITS:
        raise InjectSpecError(
            f"--inject: the shares add up to {share_text(total / SHARE_UNITS)}, over 100%"
        )
    ordered = tuple(
        (kind, units / SHARE_UNITS)
        for kind, units in sorted(shares.items(), key=lambda item: _order(item[0]))
    )
    return InjectionSpec(ordered, retry_after_s=retry_after_ms / 1000, slow_s=slow_ms / 1000)


def inject_problem(text: str | None) -> str | None:
    """Why ``text`` is no ``--inject`` value (None: it is one)."""
    try:
        parse_inject(text)
    except InjectSpecError as exc:
        return str(exc)
    return None


def _uniform(seed: int, task_id: str, attempt: int, index: int) -> float:
    """A number in [0, 1) fixed by its arguments alone (not Python's salted ``hash``)."""
    key = f"{seed}\x00{task_id}\x00{attempt}\x00{index}".encode("utf-8", "surrogatepass")
    (value,) = struct.unpack(">Q", hashlib.blake2b(key, digest_size=8).digest())
    return value / 2.0**64


@dataclass(frozen=True)
class Fault:
    kind: str  # "429", "5xx" codes, "timeout", "drop", "truncate", "slow"

    @property
    def before_upstream(self) -> bool:
        """The proxy answers without asking the provider (no call is paid)."""
        return self.kind in BEFORE_UPSTREAM or _is_server_error(self.kind)

    @property
    def status(self) -> int | None:
        return int(self.kind) if self.kind.isdigit() else None


class FaultInjector:
    """The run's seeded decisions; ``hang_s``: how long an injected timeout hangs."""

    def __init__(self, spec: InjectionSpec, seed: int, hang_s: float) -> None:
        self.spec = spec
        self.seed = seed
        self.hang_s = hang_s
        bounds: list[tuple[float, Fault]] = []
        upper = 0.0
        for kind, share in spec.shares:
            upper += share
            bounds.append((upper, Fault(kind)))
        self._bounds = tuple(bounds)

    def decide(self, task_id: str, attempt: int, index: int) -> Fault | None:
        """The fault for call ``index`` of ``(task_id, attempt)``, or None."""
        draw = _uniform(self.seed, task_id, attempt, index)
        for upper, fault in self._bounds:
            if draw < upper:
                return fault
        return None


def _answered(call: dict[str, Any]) -> bool:
    """The call got a whole answer from the model."""
    status = call.get("status")
    return not call.get("error_kind") and isinstance(status, int) and status < 400


def classify_faults(calls: list[dict[str, Any]], outcome: str) -> list[tuple[int, str]]:
    """Per injected call of an attempt (by position in ``calls``): ``recovered``, ``surfaced``
    or ``misattributed`` (see the module's docstring)."""
    judged = outcome in ("pass", "fail")
    verdicts: list[tuple[int, str]] = []
    for position, call in enumerate(calls):
        if not call.get("injected"):
            continue
        if any(_answered(later) for later in calls[position:]):
            # A later whole answer (or this one: a slow call that arrived) recovers it.
            verdicts.append((position, "recovered"))
        elif not judged:
            verdicts.append((position, "surfaced"))
        else:
            verdicts.append((position, "misattributed"))
    return verdicts


def injection_figures(calls: list[dict[str, Any]], outcome: str) -> dict[str, int]:
    """An attempt row's injection counts (a run that injects adds them to every row)."""
    verdicts = [verdict for _, verdict in classify_faults(calls, outcome)]
    figures = {
        "injected_faults": len(verdicts),
        "injected_recovered": verdicts.count("recovered"),
        "injected_surfaced": verdicts.count("surfaced"),
        "injected_misattributed": verdicts.count("misattributed"),
    }
    if any("absorbed" in call for call in calls):
        # Absorbing (--link-faults absorb): of the faults, those the proxy held back and sent
        # again, which the agent never saw (a part of the recovered ones, or of the others
        # when the agent left during the wait).
        figures["injected_absorbed"] = sum(
            1 for call in calls if call.get("injected") and call.get("absorbed")
        )
    return figures


def fault_response(
    fault: Fault, protocol: str | None, request_id: str, retry_after_s: float
) -> web.Response:
    """What a faulty gateway answers for a 429 or 5xx (``Retry-After`` on a 429)."""
    headers = {"x-request-id": request_id}
    if fault.kind == "429":
        headers["Retry-After"] = seconds_text(retry_after_s)
    return web.Response(
        status=int(fault.kind),
        body=provider_error_body(fault.kind, protocol),
        content_type="application/json",
        headers=headers,
    )


def cut_answer(answer: bytes, streamed: bool) -> bytes:
    """The first half of an answer: a stream cut after its last whole event in that half (some
    events arrive, never the end), a body cut at half its bytes."""
    half = answer[: len(answer) // 2]
    if streamed:
        cut = half.rfind(b"\n\n")
        if cut > 0:
            return half[: cut + 2]
    return half


__all__ = [
    "MAX_DURATION_S",
    "Fault",
    "FaultInjector",
    "InjectSpecError",
    "InjectionSpec",
    "classify_faults",
    "cut_answer",
    "fault_response",
    "inject_problem",
    "injection_figures",
    "parse_inject",
    "seconds_text",
    "share_text",
]
