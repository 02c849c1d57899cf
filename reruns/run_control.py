"""A live run's control channel: set its concurrency (or give it back to ``auto``), pause
starting new attempts, unpause — from ``driftdesk ctl``, the workbench, another terminal.

The channel is a folder in the run dir (``control/``, mode 0700, as private as the run's own
files): a request is one small JSON file written there (atomically, 0600); the running
execution takes the requests every ``POLL_SECONDS``, applies them and appends what it did,
with its time, to ``control.jsonl`` (the rows the report shows). So only the run's user can
control it (nobody else can write the folder, and ``send_request`` refuses a run dir owned by
another user), a harness cannot (``DRIFTDESK_RUN_CHILD`` is refused, and under ``--isolate``
the run dir, channel included, is hidden behind an empty tmpfs), and a finished, unknown or
foreign run gets a one-line refusal. It works for local and Ray runs alike: the execution
(the driver) owns the admission of attempts and the call gate either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from driftdesk.fileio import atomic_write_text
from driftdesk.reruns.concurrency import (
    DEFAULT_AUTO,
    AttemptAdmission,
    AutoBounds,
    Concurrency,
    ConcurrencyController,
    ConcurrencyError,
    LimitChange,
    concurrency_text,
    parse_concurrency,
)
from driftdesk.reruns.events import ConcurrencyChanged, RunControlled
from driftdesk.reruns.rundir import is_live, iso, utc_now
from driftdesk.rundir import CONTROL_DIR, read_manifest
from driftdesk.rundir.control_log import (
    CONTROL_KIND,
    EPISODE,
    LIMIT_KIND,
    START_KIND,
    control_rows,
)

POLL_SECONDS = 0.2  # how often a run looks for requests: a change lands well within 1.5 s
ANSWER_SECONDS = 3.0  # how long ``send_request`` waits for the run to take a request
RUN_CHILD_ENV = "DRIFTDESK_RUN_CHILD"  # reruns.command_agent's, without importing it
_REQUEST_SUFFIX = ".request.json"

log = logging.getLogger(__name__)


class ControlRefused(RuntimeError):
    """A request that cannot be sent or was not taken (one line)."""


@dataclass(frozen=True)
class ControlRequest:
    """One change: a concurrency, a pause (True) or unpause (False), or both."""

    concurrency: Concurrency | None = None
    pause: bool | None = None
    by: str = "ctl"  # who asked: "ctl", "workbench"
    id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "by": self.by,
            "concurrency": concurrency_text(self.concurrency) if self.concurrency else None,
            "pause": self.pause,
        }

    @classmethod
    def from_json(cls, data: Any) -> ControlRequest:
        """Raises ``ValueError`` on anything but a request ``to_json`` wrote."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        concurrency = data.get("concurrency")
        pause = data.get("pause")
        if pause is not None and not isinstance(pause, bool):
            raise ValueError("pause must be true, false or null")
        return cls(
            concurrency=parse_concurrency(str(concurrency)) if concurrency is not None else None,
            pause=pause,
            by=str(data.get("by") or "ctl")[:40],
            id=str(data.get("id") or "")[:64],
        )

    def describe(self) -> str:
        parts = []
        if self.concurrency is not None:
            parts.append(f"concurrency {concurrency_text(self.concurrency)}")
        if self.pause is not None:
            parts.append("paused" if self.pause else "unpaused")
        return ", ".join(parts) or "nothing"


def control_dir(run_dir: Path) -> Path:
    return Path(run_dir) / CONTROL_DIR


def open_channel(run_dir: Path) -> None:
    """Make the run's control folder (private) and drop requests left from before this
    process: nobody answered them, and their sender has given up."""
    folder = control_dir(run_dir)
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    for stale in folder.glob(f"*{_REQUEST_SUFFIX}"):
        with contextlib.suppress(OSError):
            stale.unlink()


def take_requests(run_dir: Path) -> tuple[list[ControlRequest], list[str]]:
    """The requests waiting, oldest first, each removed as it is taken; and one line per file
    that is not a request (removed too)."""
    folder = control_dir(run_dir)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(_REQUEST_SUFFIX))
    except OSError:
        return [], []
    requests: list[ControlRequest] = []
    problems: list[str] = []
    for name in names:
        path = folder / name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            requests.append(ControlRequest.from_json(data))
        except (OSError, ValueError, ConcurrencyError) as exc:
            problems.append(f"{CONTROL_DIR}/{name}: not a control request ({exc}); skipped")
        with contextlib.suppress(OSError):
            path.unlink()
    return requests, problems


def setting_now(run_dir: Path, recorded: Concurrency) -> Concurrency:
    """The concurrency the run's user last left it at: the setting of ``control.jsonl``'s last
    row (a retune, or what an execution started with; the file outlives a ``kill -9``), else
    ``recorded`` (the manifest's). What a resume without ``--concurrency`` runs at."""
    for row in reversed(control_rows(run_dir)):
        setting = row.get("setting")
        if isinstance(setting, str):
            with contextlib.suppress(ConcurrencyError):
                return parse_concurrency(setting)
    return recorded


class ControlReplay:
    """``control.jsonl``'s rows as the events the run emitted when it wrote them: how a process
    that sees only the run's files (the workbench following a run another process executes)
    learns its limit, setting, pause and rate-limit episodes. Rows come in file order, a
    resumed run's earlier executions first; the last one says how the run runs now."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.episodes = 0

    def events(self, rows: list[dict[str, Any]]) -> list[ConcurrencyChanged | RunControlled]:
        events: list[ConcurrencyChanged | RunControlled] = []
        for row in rows:
            kind = row.get("kind")
            if kind == "limit" and isinstance(row.get("limit"), int):
                reason = str(row.get("reason") or "")
                self.episodes += reason == EPISODE
                previous = row.get("previous")
                events.append(
                    ConcurrencyChanged(
                        self.run_id,
                        row["limit"],
                        previous if isinstance(previous, int) else row["limit"],
                        reason,
                        str(row.get("setting") or ""),
                        self.episodes,
                    )
                )
            elif kind in (CONTROL_KIND, START_KIND):  # a retune, or an execution began
                events.append(RunControlled(self.run_id, row))
        return events


def refusal(run_dir: Path) -> str | None:
    """Why ``run_dir`` cannot be controlled from here, in one line; None: it can."""
    if RUN_CHILD_ENV in os.environ:
        return (
            f"refused: {RUN_CHILD_ENV} is set, so this process runs inside a driftdesk run's "
            "harness, and a harness controls no run"
        )
    try:
        info = os.stat(run_dir)
    except OSError:
        return f"no run at {run_dir}"
    if info.st_uid != os.getuid():
        return f"{run_dir} is another user's run: only the user who started it can control it"
    try:
        manifest = read_manifest(run_dir)
    except (OSError, ValueError):
        return f"{run_dir} is not a run dir (no readable manifest.json)"
    if not is_live(run_dir):
        status = manifest.get("status") or "unknown"
        if status == "running":
            return f"{run_dir} is not running (its process is gone): driftdesk resume {run_dir}"
        return f"{run_dir} is not running (it is {status})"
    if manifest.get("agent") == "inspect":
        return f"{run_dir} is an inspect run: inspect runs its own samples (inspect ctl limits)"
    return None


def send_request(
    run_dir: Path, request: ControlRequest, wait_s: float = ANSWER_SECONDS
) -> dict[str, Any]:
    """Hand ``request`` to the live run in ``run_dir`` and wait until it is applied; the
    ``control.jsonl`` row saying what was done. Raises ``ControlRefused`` (one line)."""
    run_dir = Path(run_dir)
    why = refusal(run_dir)
    if why is not None:
        raise ControlRefused(why)
    request_id = request.id or f"{time.time_ns()}-{os.getpid()}-{secrets.token_hex(3)}"
    sent = ControlRequest(request.concurrency, request.pause, request.by, request_id)
    path = control_dir(run_dir) / f"{request_id}{_REQUEST_SUFFIX}"
    try:
        atomic_write_text(path, json.dumps(sent.to_json()), mode=0o600, durable=False)
    except OSError as exc:
        raise ControlRefused(
            f"cannot write {path}: {exc.strerror or exc} (is the run still running?)"
        ) from None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not path.exists():
            for row in reversed(control_rows(run_dir)):
                if row.get("request") == request_id:
                    return row
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        path.unlink()
    raise ControlRefused(f"{run_dir}: the run did not take the request within {wait_s:g} s")


class LiveControl:
    """The run side: the concurrency controller (the proxy's call gate), the admission of new
    attempts, the requests taken from the channel, and their record (``control.jsonl`` rows,
    events, the manifest's ``concurrency_control``)."""

    def __init__(
        self,
        run_dir: Path,
        run_id: str,
        setting: Concurrency,
        emit: Callable[[Any], None],
        on_limit: Callable[[], None],
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.setting = setting
        self._emit = emit
        self._on_limit = on_limit  # the execution starts workers when the limit rises
        self.controller = ConcurrencyController(
            setting, on_change=self._limit_changed, saturated=self._saturated
        )
        self.admission = AttemptAdmission(self.controller.limit)
        self._rows: RowSink | None = None
        self.retunes: list[dict[str, Any]] = []  # this execution's requests, as applied
        # The auto bounds the run was given (plain ``auto`` later means these)
        self._own_auto = setting if isinstance(setting, AutoBounds) else None

    def open(self, rows: RowSink) -> None:
        """Start recording to ``rows`` (control.jsonl) and take requests from the channel."""
        open_channel(self.run_dir)
        self._rows = rows
        self._record(
            {
                "kind": START_KIND,
                "setting": concurrency_text(self.setting),
                "limit": self.controller.limit(),
                "paused": self.admission.paused,
            }
        )

    def close(self) -> None:
        self._rows = None

    def worker_count(self) -> int:
        """Workers enough for the limit: the auto bounds' max, or the number."""
        return self.setting.max if isinstance(self.setting, AutoBounds) else max(1, self.setting)

    def _saturated(self) -> bool:
        # Every attempt the limit allows is running: the limit, not the work, holds the run
        # back (the controller grows it only then).
        return self.admission.running >= self.controller.limit()

    def _record(self, row: dict[str, Any]) -> dict[str, Any]:
        row = {"at": iso(utc_now()), **row}
        if self._rows is not None:
            self._rows.append(row)
        return row

    def _limit_changed(self, change: LimitChange) -> None:
        setting = concurrency_text(self.setting)
        self._record(
            {
                "kind": LIMIT_KIND,
                "limit": change.limit,
                "previous": change.previous,
                "reason": change.reason,
                "setting": setting,
            }
        )
        self.admission.changed()
        self._on_limit()
        episodes = self.controller.endpoint(change.endpoint).episodes
        self._emit(
            ConcurrencyChanged(
                self.run_id, change.limit, change.previous, change.reason, setting, episodes
            )
        )

    def apply(self, request: ControlRequest) -> dict[str, Any]:
        """Apply one request: a concurrency (a number, or auto again: within the run's own
        bounds when it started auto), a pause of new attempts or its end; recorded."""
        if request.concurrency is not None:
            setting = request.concurrency
            if setting == AutoBounds(*DEFAULT_AUTO) and self._own_auto is not None:
                setting = self._own_auto  # plain ``auto`` on a run that had bounds: those
            elif isinstance(setting, AutoBounds):
                self._own_auto = setting
            request = dataclasses.replace(request, concurrency=setting)  # as applied
            self.setting = setting
            self.controller.set(setting)
        if request.pause is not None:
            self.admission.pause(request.pause)
        self.admission.changed()
        self._on_limit()
        row = self._record(
            {
                "kind": CONTROL_KIND,
                "request": request.id,
                "by": request.by,
                "change": request.describe(),
                "setting": concurrency_text(self.setting),
                "limit": self.controller.limit(),
                "paused": self.admission.paused,
            }
        )
        self.retunes.append(row)
        self._emit(RunControlled(self.run_id, row))
        return row

    async def take_requests(self) -> None:
        """Apply the channel's requests as they come (until cancelled)."""
        while True:
            await asyncio.sleep(POLL_SECONDS)
            requests, problems = take_requests(self.run_dir)
            for problem in problems:
                log.warning("%s", problem)
            for request in requests:
                self.apply(request)

    def summary(self, earlier: Any) -> dict[str, Any]:
        """The manifest's ``concurrency_control``: the setting the run started as and the one
        it ends with, the limit's range, rate-limit episodes, every retune (a resume adds its
        own to the earlier ones)."""
        earlier = earlier if isinstance(earlier, dict) else {}
        retunes = [r for r in earlier.get("retunes") or [] if isinstance(r, dict)]
        summary = self.controller.summary()
        return {
            **earlier,
            "started_as": earlier.get("started_as") or earlier.get("setting"),
            **summary,
            "setting": concurrency_text(self.setting),
            "retunes": retunes + self.retunes,
        }


class RowSink(Protocol):
    def append(self, row: dict[str, Any]) -> None: ...
