"""One digest of the code that turns runs into figures, for every cache of derived data.

The row cache, the kept report JSON, the trend cache and the kept pair verdicts each hold
what this code computed; a cache made by other code (an upgrade, a local edit) must be made
again, never read. Listing the modules each cache depends on went stale twice (a query moved
to a module the list left out), so each digests all of them: every module of
``driftdesk.analysis`` and of the ``driftdesk`` core it uses (files, layout, task ids), and
DuckDB's version. A change anywhere there costs one cold read per cache; a missed change
would show old figures.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from pathlib import Path

_ANALYSIS = Path(__file__).resolve().parent


def _core() -> Path:
    import driftdesk

    return Path(driftdesk.__file__).resolve().parent


def code_version(kind: str) -> str:
    """The digest for a cache of ``kind`` (its name and format version, e.g. ``"rows:1"``).
    Code that cannot be read gets a version of this process alone: what it caches is never
    read by another."""
    return hashlib.sha256(f"{kind}\0{_code_digest()}".encode()).hexdigest()[:32]


@functools.cache
def _code_digest() -> str:
    """The modules and DuckDB's version, read once per process (a report asks for the row
    cache's version and the kept report's)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        duckdb_version = version("duckdb")
    except PackageNotFoundError:  # not installed as a distribution: the import says
        import duckdb

        duckdb_version = duckdb.__version__
    digest = hashlib.sha256(duckdb_version.encode())
    try:
        for folder in (_ANALYSIS, _core()):
            sources = sorted(folder.glob("*.py"))
            if not sources:  # bytecode only, or frozen: no change could be seen
                raise OSError(f"no sources in {folder}")
            for path in sources:
                digest.update(f"{folder.name}/{path.name}\0".encode() + path.read_bytes())
    except OSError:
        return f"unreadable-{uuid.uuid4().hex}"
    return digest.hexdigest()
