"""Run ids and safe names: how a run dir (and a task's folder) is named.

A run id is its folder's name under the runs dir: ``<profile>-<model>-<UTC second>`` for a run,
``import-<format>-<file stem>-<UTC second>`` (or the name asked for) for an import, made safe as
a file name; when that folder exists, ``-2``, ``-3``... are tried in turn.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Iterator

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# A run id's time: the UTC second its run (or import) started.
RUN_ID_TIME_FORMAT = "%Y%m%dT%H%M%SZ"


def safe_name(text: str, fallback: str = "x") -> str:
    """``text`` as a file or folder name: runs of other characters become ``-`` (``fallback``
    when nothing is left)."""
    return _UNSAFE.sub("-", text).strip("-.") or fallback


def run_id_base(profile: str, model: str, now: dt.datetime) -> str:
    """The run id a new run of ``profile`` and ``model`` starting at ``now`` is named."""
    return safe_name(f"{profile}-{model}-{now.strftime(RUN_ID_TIME_FORMAT)}")


def import_run_id_base(fmt: str, source_stem: str, now: dt.datetime, asked: str | None) -> str:
    """The run id an import of ``fmt`` from a file named ``source_stem`` is named (``asked``,
    the ``--run-id`` given, when there is one)."""
    text = asked or f"import-{fmt}-{source_stem}-{now.strftime(RUN_ID_TIME_FORMAT)}"
    return safe_name(text, fallback="import")


def candidate_run_ids(base: str) -> Iterator[str]:
    """``base``, then ``base-2``, ``base-3``...: the names tried until one is free."""
    yield base
    for n in itertools.count(2):
        yield f"{base}-{n}"
