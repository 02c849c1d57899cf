"""Exact backups that hold no secret: masked copies on disk, the masked values in the OS keyring.

A backup copy of a user's file is written with every key-like value masked (``sk-…7f3a``, see
``providers.masking``). Each distinct masked value goes to the OS keyring, under its own service
(``<driftdesk service>-backups``) and one entry per value, and ``<copy>.masked.json`` beside the
copy records where each value stood, the keyring entry, and the sha256 of the exact original.
``read_copy`` puts the values back and checks the sha256, so a restore gives the original bytes.
``forget_copy`` removes a pruned copy together with its keyring entries.

No keyring, no backup: if a value cannot be stored, nothing is written and the caller refuses
the change it was about to make.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

from driftdesk.fileio import atomic_write_bytes, atomic_write_json
from driftdesk.providers import keys
from driftdesk.providers.errors import KeyringUnavailable, RestoreError
from driftdesk.providers.masking import MaskedValue, mask_exact, unmask

MASKED_SUFFIX = ".masked.json"
FORMAT = 2  # format 1 (no keyring entries, no sha256) masked values for good: not exact


def service() -> str:
    return keys.service_name() + "-backups"


def sidecar(copy: Path) -> Path:
    return copy.with_name(copy.name + MASKED_SUFFIX)


def _decode(data: bytes) -> str:
    # surrogateescape: any byte sequence round-trips, so even a non-UTF-8 copy stays exact.
    return data.decode("utf-8", "surrogateescape")


def write_copy(copy: Path, data: bytes, kind: str, entry_prefix: str) -> None:
    """Write ``data`` to ``copy`` with its secrets masked and kept in the keyring.

    Raises ``KeyringUnavailable`` (having written nothing) if a value cannot be stored."""
    masked_text, values = mask_exact(kind, _decode(data))
    entries: list[dict[str, Any]] = []
    stored: list[str] = []
    try:
        kr = keys.backend() if values else None
        for index, value in enumerate(values):
            entry = f"{entry_prefix}#{index}"
            assert kr is not None
            keys._call("store a backup value", kr.set_password, service(), entry, value.value)
            stored.append(entry)
            entries.append(
                {
                    "where": value.where,
                    "shown_as": value.shown,
                    "entry": entry,
                    "spans": [list(span) for span in value.spans],
                }
            )
    except KeyringUnavailable as exc:
        _delete_entries(stored)
        raise KeyringUnavailable(
            "a backup keeps the file's key-like values in the OS keyring, and that failed "
            f"({exc}); no backup was written"
        ) from exc
    atomic_write_bytes(copy, masked_text.encode("utf-8", "surrogateescape"), mode=0o600)
    atomic_write_json(
        sidecar(copy),
        {
            "format": FORMAT,
            "sha256": hashlib.sha256(data).hexdigest(),
            "keyring_service": service(),
            "masked": entries,
            "note": "key-like values are masked in this copy and kept in the OS keyring "
            "(one entry each); driftdesk restore puts them back",
        },
        mode=0o600,
    )


def is_exact(copy: Path) -> bool:
    """Can ``read_copy`` give this copy's original bytes back?"""
    note = _read_sidecar(copy)
    return note is None or note.get("format") == FORMAT


def read_copy(copy: Path) -> bytes:
    """The exact bytes this copy was taken from (``RestoreError`` if that cannot be had)."""
    data = copy.read_bytes()
    note = _read_sidecar(copy)
    if note is None:
        return data  # taken verbatim by an older driftdesk: nothing was masked
    if note.get("format") != FORMAT:
        raise RestoreError(
            f"{copy} was taken by an older driftdesk that masked key-like values without keeping "
            "them: it cannot be restored byte for byte"
        )
    values: list[MaskedValue] = []
    kr = keys.backend() if note["masked"] else None
    for item in note["masked"]:
        assert kr is not None
        value = keys._call("read a backup value", kr.get_password, service(), item["entry"])
        if value is None:
            raise RestoreError(
                f"the OS keyring no longer holds the value masked as {item['shown_as']} in "
                f"{copy} (entry {item['entry']!r} of service {service()!r})"
            )
        spans = [(int(a), int(b)) for a, b in item["spans"]]
        values.append(MaskedValue(item["where"], str(value), item["shown_as"], spans))
    try:
        exact = unmask(_decode(data), values).encode("utf-8", "surrogateescape")
    except ValueError as exc:
        raise RestoreError(f"{copy} was changed after driftdesk wrote it ({exc})") from exc
    if hashlib.sha256(exact).hexdigest() != note.get("sha256"):
        raise RestoreError(f"{copy} does not reassemble to the file it was taken from")
    return exact


def forget_copy(copy: Path) -> None:
    """Delete a copy, its note and its keyring entries."""
    note = _read_sidecar(copy)
    if note is not None and note.get("format") == FORMAT:
        with contextlib.suppress(KeyringUnavailable):
            _delete_entries([item["entry"] for item in note["masked"]])
    copy.unlink(missing_ok=True)
    sidecar(copy).unlink(missing_ok=True)


def _delete_entries(entries: list[str]) -> None:
    if not entries:
        return
    import keyring.errors

    kr = keys.backend()
    for entry in entries:
        with contextlib.suppress(keyring.errors.PasswordDeleteError):
            keys._call("delete a backup value", kr.delete_password, service(), entry)


def _read_sidecar(copy: Path) -> dict[str, Any] | None:
    try:
        note = json.loads(sidecar(copy).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"format": None}
    return note if isinstance(note, dict) else {"format": None}
