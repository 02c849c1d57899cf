"""A run executed in a child process, its events relayed to the parent as JSON lines.

The workbench executes runs this way: the engine (~17 ms of CPU per attempt) then has a core
of its own instead of sharing the app's GIL, so key presses and redraws are answered at once
however many attempts are in flight (see docs/ARCHITECTURE.md, "How the workbench executes a
run").

The protocol, both ends in this module:

- The parent starts ``python -m driftdesk.reruns.run_process`` and writes one JSON line on its
  stdin: what to run (``new_run_request`` / ``resume_request``) and the key, if the face holds
  one in memory (the demo's, a typed one). The key is never in the child's argv or
  environment; a saved profile's key the child reads from the keyring itself. The parent keeps
  stdin open: its end of file (the parent died) interrupts the run.
- The child writes the engine's events on stdout, one ``events.event_to_json`` line each,
  batched every ``FLUSH_SECONDS``; then, if the run could not start or broke, one
  ``{"failure": message}`` line. Anything else the child prints goes to its stderr.
- SIGTERM or SIGINT interrupts the run as in ``driftdesk run``: in-flight attempts are
  cancelled, the manifest says ``interrupted`` and the run dir stays resumable.
- A child that ends without a ``RunFinished`` or a failure (kill -9) is reported as
  ``RunProcessDied`` naming the resume command.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from driftdesk.reruns.events import (
    AttemptEnded,
    AttemptOutput,
    RunEvent,
    RunFinished,
    RunListener,
    RunStarted,
    event_from_json,
    event_to_json,
)

# The child sends what the engine emitted at most this long ago (fewer, larger writes: the
# parent wakes a few times per tick instead of once per event).
FLUSH_SECONDS = 0.05
FLUSH_BYTES = 1 << 16
# A chatty agent's output crosses the pipe capped (its files keep all of it).
OUTPUT_LINES_PER_ATTEMPT = 2000
OUTPUT_LINE_CHARS = 4000
STDERR_LINES_KEPT = 20
EXIT_INTERRUPTED = 130


class RunProcessFailed(Exception):
    """The run could not start or broke; the message is the engine's own."""


class RunProcessDied(Exception):
    """The child ended without saying how the run ended (killed, crashed)."""

    def __init__(self, message: str, run_dir: Path | None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


# -- requests (what the parent asks the child to run) --------------------------------------------


def new_run_request(spec: Any) -> dict[str, Any]:
    """The request for ``engine.execute_run(spec)``; ``spec.api_key`` travels beside the spec."""
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    api_key = fields.pop("api_key")
    if not isinstance(spec.profile, str):
        fields["profile"] = dataclasses.asdict(spec.profile)
    for name in ("only_failed", "only_volatile", "out_dir"):
        if fields[name] is not None:
            fields[name] = str(fields[name])
    fields["retry_policy"] = dataclasses.asdict(spec.retry_policy)
    fields["ray"] = dataclasses.asdict(spec.ray)
    if spec.adaptive is not None:
        fields["adaptive"] = spec.adaptive.to_manifest()
    from driftdesk.reruns.concurrency import concurrency_text

    fields["concurrency"] = concurrency_text(spec.concurrency)  # "4" or "auto:1-4-64"
    return {"action": "run", "spec": fields, "api_key": api_key}


def spec_of(request: dict[str, Any]) -> Any:
    """The ``RunSpec`` of a ``new_run_request`` (the key included)."""
    from driftdesk.providers.profiles import Profile
    from driftdesk.reruns.ray_executor import RaySettings
    from driftdesk.reruns.retry import RetryPolicy
    from driftdesk.reruns.run_spec import RunSpec

    fields = dict(request["spec"])
    if isinstance(fields["profile"], dict):
        fields["profile"] = Profile(**fields["profile"])
    for name in ("only_failed", "only_volatile", "out_dir"):
        if fields[name] is not None:
            fields[name] = Path(fields[name])
    fields["retry_policy"] = RetryPolicy(**fields["retry_policy"])
    fields["ray"] = RaySettings(**fields["ray"])
    from driftdesk.reruns.concurrency import parse_concurrency

    fields["concurrency"] = parse_concurrency(str(fields["concurrency"]))
    if fields.get("adaptive") is not None:
        from driftdesk.reruns.adaptive import AdaptiveDesign

        fields["adaptive"] = AdaptiveDesign.from_manifest(fields["adaptive"])
    return RunSpec(**fields, api_key=request.get("api_key"))


def resume_request(
    run_dir: Path,
    *,
    retry_link_errors: bool = False,
    api_key: str | None = None,
    profile: Any = None,
    probe: bool = True,
) -> dict[str, Any]:
    """The request for ``engine.resume_run`` of ``run_dir`` (``profile``: an unsaved one)."""
    return {
        "action": "resume",
        "run_dir": str(Path(run_dir).resolve()),
        "retry_link_errors": retry_link_errors,
        "profile": None if profile is None else dataclasses.asdict(profile),
        "probe": probe,
        "api_key": api_key,
    }


# -- the parent's side ---------------------------------------------------------------------------


async def run_in_child(
    request: dict[str, Any],
    listener: RunListener,
    *,
    on_start: Callable[[int], None] | None = None,
) -> None:
    """Execute ``request`` in a child process, feeding its events to ``listener`` (on this
    loop). Cancelling this coroutine interrupts the run (SIGTERM) and waits for the child to
    write its manifest. Raises ``RunProcessFailed`` (could not start, broke) or
    ``RunProcessDied`` (ended without a word)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "driftdesk.reruns.run_process",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    if on_start is not None:
        on_start(proc.pid)
    relay = _Relay(listener)
    stderr_tail: deque[str] = deque(maxlen=STDERR_LINES_KEPT)
    stderr_task = asyncio.create_task(_keep_tail(proc.stderr, stderr_tail))
    try:
        with contextlib.suppress(ConnectionError):  # a child dead at once: said below
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            await proc.stdin.drain()
        try:
            await relay.read(proc.stdout)
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            await relay.read(proc.stdout)  # the run's last events, RunFinished among them
            await proc.wait()
            raise
        await proc.wait()
        await stderr_task
    finally:
        if proc.returncode is None:  # cancelled again, or a listener broke: do not leave it
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        stderr_task.cancel()
        proc.stdin.close()
    if relay.failure is not None:
        raise RunProcessFailed(relay.failure)
    if not relay.finished:
        raise RunProcessDied(_died_message(proc.returncode, stderr_tail, relay), relay.run_dir)


class _Relay:
    """Reads the child's event lines in chunks and feeds them to the listener."""

    def __init__(self, listener: RunListener) -> None:
        self.listener = listener
        self.failure: str | None = None
        self.finished = False
        self.run_dir: Path | None = None
        self._partial = b""

    async def read(self, stream: asyncio.StreamReader) -> None:
        while True:
            chunk = await stream.read(FLUSH_BYTES)
            if not chunk:
                return
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            for line in lines:
                self._line(line)

    def _line(self, line: bytes) -> None:
        if not line.strip():
            return
        if line.startswith(b'{"failure"'):
            self.failure = str(json.loads(line)["failure"])
            return
        event = event_from_json(line)
        if isinstance(event, RunStarted):
            self.run_dir = event.run_dir
        elif isinstance(event, RunFinished):
            self.finished = True
        self.listener.on_event(event)


async def _keep_tail(stream: asyncio.StreamReader, tail: deque[str]) -> None:
    async for line in stream:
        tail.append(line.decode(errors="replace").rstrip())


def _died_message(code: int | None, stderr_tail: deque[str], relay: _Relay) -> str:
    from driftdesk.secrets import redact

    if code is not None and code < 0:
        how = f"was killed ({signal.Signals(-code).name})"
    else:
        last = next((line for line in reversed(stderr_tail) if line.strip()), "")
        how = f"exited with code {code}" + (f": {redact(last)}" if last else "")
    message = f"The run's process {how} before the run ended."
    if relay.run_dir is not None:
        message += (
            " The attempts it finished are kept; run the missing ones with: "
            f"driftdesk resume {relay.run_dir}"
        )
    return message


# -- the child's side ----------------------------------------------------------------------------


class _EventWriter:
    """The child's listener: event lines batched onto the parent's pipe.

    Called on the engine's loop; a write that blocks (the parent reads slower than the run
    goes) holds the engine back rather than growing memory. A parent gone (a broken pipe)
    interrupts the run: nobody would see it, and the run dir stays resumable."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop, on_gone: Callable[[], object]):
        self._fd = fd
        self._loop = loop
        self._on_gone = on_gone
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._size = 0
        self._scheduled = False
        self._gone = False
        self._output_lines: Counter[tuple[str, int]] = Counter()

    def on_event(self, event: RunEvent) -> None:
        if isinstance(event, AttemptOutput):
            capped = self._capped(event)
            if capped is None:
                return
            event = capped
        elif isinstance(event, AttemptEnded):
            self._output_lines.pop((event.task_id, event.attempt), None)
        self.send(event_to_json(event), now=isinstance(event, RunFinished))

    def _capped(self, event: AttemptOutput) -> AttemptOutput | None:
        key = (event.task_id, event.attempt)
        self._output_lines[key] += 1
        count = self._output_lines[key]
        if count > OUTPUT_LINES_PER_ATTEMPT + 1:
            return None
        if count == OUTPUT_LINES_PER_ATTEMPT + 1:
            text = (
                f"[driftdesk] more output than the {OUTPUT_LINES_PER_ATTEMPT} lines shown "
                "live: the attempt's files hold all of it"
            )
            return dataclasses.replace(event, stream="turn", text=text)
        if len(event.text) > OUTPUT_LINE_CHARS:
            return dataclasses.replace(event, text=event.text[:OUTPUT_LINE_CHARS] + "…")
        return event

    def send(self, line: str, *, now: bool = False) -> None:
        data = line.encode() + b"\n"
        with self._lock:
            self._pending.append(data)
            self._size += len(data)
            now = now or self._size >= FLUSH_BYTES
            schedule = not now and not self._scheduled
            self._scheduled = self._scheduled or schedule
        if now:
            self.flush()
        elif schedule:
            self._loop.call_soon_threadsafe(self._loop.call_later, FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        with self._lock:  # held while writing: lines leave in the order they were sent
            data, self._pending, self._size, self._scheduled = b"".join(self._pending), [], 0, False
            if not data or self._gone:
                return
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError:  # the parent is gone
                self._gone = True
        if self._gone:
            self._on_gone()


async def _serve(request: dict[str, Any], events_fd: int) -> None:
    from driftdesk.providers.profiles import Profile
    from driftdesk.reruns.run_start import execute_run, resume_run

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    interrupted = False

    def interrupt() -> None:
        # Once: a second cancel would cut short the engine's writing of the manifest.
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            task.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupt)

    def parent_said() -> None:
        try:
            data = os.read(0, 4096)
        except OSError:
            data = b""
        if not data:  # the parent closed our stdin or died
            loop.remove_reader(0)
            interrupt()

    with contextlib.suppress(OSError, ValueError):  # stdin is not a pipe: nothing to watch
        loop.add_reader(0, parent_said)
    writer = _EventWriter(events_fd, loop, on_gone=lambda: loop.call_soon_threadsafe(interrupt))
    try:
        if request.get("action") == "resume":
            profile = request.get("profile")
            await resume_run(
                Path(request["run_dir"]),
                writer,
                retry_link_errors=bool(request.get("retry_link_errors")),
                api_key=request.get("api_key"),
                profile=Profile(**profile) if profile else None,
                probe=bool(request.get("probe", True)),
            )
        else:
            await execute_run(spec_of(request), writer)
    finally:
        writer.flush()


def main() -> int:
    """The child: one request on stdin, the run's events on stdout."""
    import logging

    from driftdesk.secrets import redact

    events_fd = os.dup(1)
    os.dup2(2, 1)  # a stray print goes to stderr, never into the event stream
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    line = os.read(0, 1 << 20)
    while line and not line.endswith(b"\n"):
        more = os.read(0, 1 << 20)
        if not more:
            break
        line += more
    try:
        request = json.loads(line)
    except ValueError:
        print("driftdesk: the run's request was not JSON", file=sys.stderr)
        return 2
    secrets = [request["api_key"]] if request.get("api_key") else []

    def fail(message: str) -> int:
        data = json.dumps({"failure": redact(message, secrets)}) + "\n"
        with contextlib.suppress(OSError):
            os.write(events_fd, data.encode())
        return 1

    try:
        asyncio.run(_serve(request, events_fd))
    except (KeyboardInterrupt, asyncio.CancelledError):
        return EXIT_INTERRUPTED
    except Exception as exc:
        import traceback

        # The message is the parent's to show; the trace only its stderr tail (a crash).
        print(redact("".join(traceback.format_exception(exc)), secrets), file=sys.stderr)
        return fail(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
