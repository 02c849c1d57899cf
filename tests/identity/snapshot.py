"""Identity snapshot: what driftdesk writes and prints, normalised, to compare two commits.

A restructuring that must change no figure and no file (issue #47) is checked commit by commit
by taking a snapshot before and after and diffing the two::

    python tests/identity/snapshot.py OUT_DIR           # take a snapshot (~1 min on 2 cores)
    python tests/identity/snapshot.py --diff A B        # exit 1 and show where A and B differ

Run it with the interpreter whose ``driftdesk`` is to be checked: the snapshot drives only the
installed CLI (``python -m driftdesk ...`` subprocesses, in a private temporary HOME and XDG
dirs, keyless, no keyring touched). To pin a commit while others commit on main::

    git worktree add /tmp/ident-wt <commit>
    python3 -m venv /tmp/ident-venv && /tmp/ident-venv/bin/pip install /tmp/ident-wt
    /tmp/ident-venv/bin/python /tmp/ident-wt/tests/identity/snapshot.py /tmp/snap-before
    ... (the same for the commit after, into /tmp/snap-after) ...
    python3 tests/identity/snapshot.py --diff /tmp/snap-before /tmp/snap-after
    git worktree remove /tmp/ident-wt

What a snapshot holds (OUT_DIR):

- ``runs/<label>/``: every file of each run dir right after its run (before any report could add
  a cache beside it): the simulated sandbox (``driftdesk sandbox``, fixed seed, no added latency)
  played by the builtin agent at concurrency 1, so every draw replays: ``basic`` (the basic
  suite, --repeat 3, --seed 5), ``inject`` (--inject 429=20%, retried tries), ``coding`` (tasks
  with a workspace, setup and check), ``command`` (--agent command: a harness calling through
  the proxy), ``resumed`` (link errors left by --inject 429=60% --max-retries 0, then
  ``resume --retry-link-errors``), ``adaptive`` (--adaptive --target volatile) and three
  imports of tests/analysis/fixtures (tau-bench; JSONL copied; JSONL zero-copy). JSONL rows
  are sorted by slot (task_id, scenario_id, attempt, then call_index, try; stable, so rows of
  one slot keep their order); gzip recordings are decoded to their JSON lines first; binary
  files and caches are listed by name only.
- ``outputs/<mode>/<name>.json`` (+ ``.meta``: exit code, JSON layout, stderr): ``report
  --format json`` (and csv), ``compare --format json``, ``trend --json``, ``explain --json``
  (a volatile task; a task with retried tries) and ``check --format json`` over those runs,
  each taken three ways: ``nocache`` (DRIFTDESK_NO_CACHE=1), ``cold`` (caches on, none yet)
  and ``warm`` (the caches the cold pass kept). Also ``outputs/runs/<label>.txt``: what each
  run/import printed on stdout.
- ``hashes/golden-and-screenshots.sha256``: tests/analysis/golden/* and screenshots/* as
  checked in next to this script.
- ``info/``: the caches left (names, digests masked), the commit, the timings: shown by
  ``--diff`` but never a failure (the cache layout is itself to be restructured).

Normalisation is one function, :func:`normalise_json` (and :func:`normalise_text` for text
files), with the rules listed in ``LITERALS`` (the temporary root, repo and package paths, the
sandbox's port, run ids -> labels), ``VALUE_PATTERNS`` (times, ports, request ids, pids, temp
paths inside any string) and ``MASKED_KEYS`` / ``MASKED_KEY_PARTS`` / ``MIXED_KEYS`` (values that measure time:
latencies, durations, timestamps; pids, ports, hosts, generated ids). A masked value keeps its
place (``"<masked>"``; null stays null), so a field that appears, vanishes or changes type is
still a difference. Imported runs' figures come from fixtures, so their outputs keep their
latencies (only times and paths are masked there).

Tests of the normaliser alone (no sandbox): tests/identity/test_snapshot.py.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "analysis" / "fixtures"
SANDBOX_SEED = 7
MASK = "<masked>"
INFO_DIR = "info"  # differences there are shown, never a failure

# --- the masking rules ---------------------------------------------------------------------

# Keys whose value is masked wherever they appear (whole subtree, nulls kept).
MASKED_KEYS = frozenset(
    {
        "pid",
        "ppid",
        "port",
        "host",
        "hostname",
        "node",
        "node_id",
        "request_id",
        "attempt_token",
        "token",
        "ino",
        "inode",
        "ctime",
        "time",
        "timestamp",
        "wall_seconds",
        "elapsed_seconds",
        "duration_seconds",
        "queue_wait_s",  # time at the call gate: a measured time like latency
        "wait_s",  # an absorbed fault's hold (Retry-After or jittered backoff)
        "absorbed_wait_s",
    }
)
# Keys that mix a measured time into a figure: a number is masked; in a breakdown by resource
# (``{"latency": .., "tokens": .., "cost": .., "resource": ..}``) only the keys listed are.
MIXED_KEYS = {"resource_consistency": frozenset({"latency", "resource"})}
# Key parts that mark a measured time (latency_ms, ttfb_ms, latency_p95, ..._duration...).
MASKED_KEY_PARTS = ("latency", "ttfb", "duration", "elapsed", "mtime")
# Keys ending so are timestamps (started_at, ended_at, imported_at, ...).
MASKED_KEY_SUFFIXES = ("_at", "_pid", "_time", "_ns")

# Patterns replaced inside every string and text line (after LITERALS), in this order.
VALUE_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"),
        "<time>",
    ),
    (re.compile(r"\b\d{8}T\d{6}Z?"), "<time>"),
    (re.compile(r"(127\.0\.0\.1|localhost|\[::1\]|0\.0\.0\.0):\d+"), r"\1:<port>"),
    (re.compile(r"\bdd-[0-9a-f]{12}-\d+\b"), "<request-id>"),
    (re.compile(r"\b(pid|PID|process) (\d+)\b"), r"\1 <pid>"),
    (re.compile(r"/tmp/[A-Za-z0-9_.+-]+"), "<tmp>"),
    (re.compile(r"\.importing-\d+"), ".importing-<pid>"),
    # A command attempt's files carry a token (attempts/<task>/0.27cbd7e9.result.json).
    (re.compile(r"\b(\d+)\.[0-9a-f]{8}\.(?=[a-z])"), r"\1.<attempt-token>."),
]


def masked_key(key: str) -> bool:
    """Whether a JSON key's value is volatile (see MASKED_KEYS and friends)."""
    lowered = key.lower()
    return (
        lowered in MASKED_KEYS
        or any(part in lowered for part in MASKED_KEY_PARTS)
        or lowered.endswith(MASKED_KEY_SUFFIXES)
    )


class Normaliser:
    """The rules above, with this snapshot's literals (temp root, port, run ids, ...)."""

    def __init__(self, literals: Iterable[tuple[str, str]] = ()) -> None:
        # Longest first, so a run dir's path goes before its parent's.
        self.literals = sorted(
            ((old, new) for old, new in literals if old), key=lambda p: -len(p[0])
        )

    def text(self, value: str) -> str:
        for old, new in self.literals:
            value = value.replace(old, new)
        for pattern, replacement in VALUE_PATTERNS:
            value = pattern.sub(replacement, value)
        return value

    def json(self, value: Any, *, figures: bool = True) -> Any:
        """``value`` with strings normalised and volatile keys masked (``figures=False``:
        measured times kept, for outputs computed from fixtures alone)."""
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                name = self.text(str(key))
                mixed = MIXED_KEYS.get(str(key).lower())
                if figures and mixed is not None and isinstance(item, dict):
                    out[name] = {
                        self.text(str(k)): _mask_tree(v) if k in mixed else self.json(v)
                        for k, v in item.items()
                    }
                elif figures and (mixed is not None or masked_key(str(key))):
                    out[name] = _mask_tree(item)
                else:
                    out[name] = self.json(item, figures=figures)
            return out
        if isinstance(value, list):
            return [self.json(item, figures=figures) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def _mask_tree(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, dict):
        return {key: _mask_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_mask_tree(item) for item in value]
    return MASK


def normalise_json(value: Any, normaliser: Normaliser | None = None, figures: bool = True) -> Any:
    return (normaliser or Normaliser()).json(value, figures=figures)


def normalise_text(text: str, normaliser: Normaliser | None = None) -> str:
    return (normaliser or Normaliser()).text(text)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else -1.0


def slot_key(row: Any) -> tuple[str, str, float, float, float]:
    """A row's slot: task, scenario, attempt, then call index and try (missing: first)."""
    if not isinstance(row, dict):
        return ("", "", -1.0, -1.0, -1.0)
    return (
        str(row.get("task_id", "")),
        str(row.get("scenario_id") or ""),
        _number(row.get("attempt")),
        _number(row.get("call_index")),
        _number(row.get("try")),
    )


def normalise_jsonl(lines: list[str], normaliser: Normaliser, figures: bool = True) -> str:
    """JSON lines sorted by slot (stable) and normalised; lines that are not JSON are kept,
    normalised as text, after them in their order."""
    rows: list[Any] = []
    other: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            other.append("NOT JSON: " + normaliser.text(line))
    rows.sort(key=slot_key)
    out = [json.dumps(normaliser.json(row, figures=figures), ensure_ascii=False) for row in rows]
    return "\n".join(out + other) + "\n"


def normalise_csv(text: str, normaliser: Normaliser, figures: bool = True) -> tuple[str, str]:
    """A CSV table with the columns named as volatile masked, and how it was written (checked
    by writing it back: a change of quoting or line ends shows)."""
    terminator = "\r\n" if "\r\n" in text else "\n"
    rows = list(csv.reader(io.StringIO(text, newline="")))
    written = io.StringIO()
    csv.writer(written, lineterminator=terminator).writerows(rows)
    layout = f"csv, line end {terminator!r}, round trip exact: {written.getvalue() == text}"
    if not rows:
        return "", layout
    masked = [figures and masked_key(column) for column in rows[0]]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([normaliser.text(column) for column in rows[0]])
    for row in rows[1:]:
        writer.writerow(
            [
                MASK if index < len(masked) and masked[index] and cell else normaliser.text(cell)
                for index, cell in enumerate(row)
            ]
        )
    return out.getvalue(), layout


def is_cache(relative: Path) -> bool:
    return any(
        part.startswith(".rows-cache") or part.startswith(".trend-aggregate") or "cache" in part
        for part in relative.parts
    )


def normalise_file(path: Path, relative: Path, normaliser: Normaliser, figures: bool) -> str:
    """One run-dir file as text to store (see the module docstring)."""
    if is_cache(relative):
        return "cache file, listed by name only\n"
    raw = path.read_bytes()
    name = path.name
    if name.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            return f"undecodable gzip: {type(error).__name__}\n"
        name = name[: -len(".gz")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "binary file, listed by name only\n"
    if name.endswith(".jsonl"):
        return normalise_jsonl(text.splitlines(), normaliser, figures)
    if name.endswith(".json"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            return json.dumps(normaliser.json(value, figures=figures), indent=1, ensure_ascii=False)
    return normaliser.text(text)


def snapshot_tree(source: Path, target: Path, normaliser: Normaliser, figures: bool) -> None:
    """Every file under ``source`` normalised into ``target`` (paths normalised too)."""
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        stored = Path(normaliser.text(str(relative)))
        if path.is_symlink():
            out, text = target / (str(stored) + ".symlink"), normaliser.text(os.readlink(path))
        elif path.is_dir():
            continue
        else:
            suffix = ".decoded" if path.name.endswith(".gz") else ""
            out = target / (str(stored) + suffix)
            text = normalise_file(path, relative, normaliser, figures)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")


# --- taking a snapshot ---------------------------------------------------------------------


def _layout_of(raw: str, value: Any) -> str:
    """How the raw JSON was laid out, checked by a round trip (so a layout change shows)."""
    text = raw.rstrip("\n")
    for name, kwargs in (
        ("compact", {"separators": (",", ":")}),
        ("default", {}),
        ("indent=2", {"indent": 2}),
        ("indent=1", {"indent": 1}),
        ("indent=4", {"indent": 4}),
    ):
        for ascii_only in (False, True):
            dumped = json.dumps(value, ensure_ascii=ascii_only, **kwargs)
            if dumped == text:
                return (
                    f"{name}, ensure_ascii={ascii_only}, trailing newline={raw.endswith(chr(10))}"
                )
    return "no standard layout"


class Snapshot:
    def __init__(self, out: Path, python: str) -> None:
        self.out = out
        self.python = python
        self.root = Path(tempfile.mkdtemp(prefix="driftdesk-identity-"))
        self.home = self.root / "home"
        self.project = self.root / "project"
        self.runs = self.project / "runs"
        for folder in (self.home, self.project, self.runs):
            folder.mkdir(parents=True)
        self.labels: dict[str, str] = {}  # run id -> label
        self.sandbox: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.timings: list[str] = []

    # -- environment and commands --

    def env(self, cache: bool) -> dict[str, str]:
        scrubbed = ("DRIFTDESK_", "XDG_", "OPENAI_", "ANTHROPIC_", "CLAUDE_", "CODEX_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(scrubbed)}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            # Keyless profile: no keyring is needed; the fail backend makes sure none is used.
            PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
            TZ="UTC",
            LC_ALL="C.UTF-8",
            COLUMNS="120",
            NO_COLOR="1",
            TERM="dumb",
        )
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        if not cache:
            env["DRIFTDESK_NO_CACHE"] = "1"
        return env

    def cli(
        self, *args: str, cache: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        result = subprocess.run(
            [self.python, "-m", "driftdesk", *args],
            cwd=self.project,
            env=self.env(cache),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.timings.append(f"{time.monotonic() - started:6.2f}s  driftdesk {' '.join(args)}")
        return result

    def must(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = self.cli(*args)
        if result.returncode != 0:
            raise SystemExit(
                f"driftdesk {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
            )
        return result

    def normaliser(self) -> Normaliser:
        literals: list[tuple[str, str]] = [
            (str(self.root), "<root>"),
            (str(REPO), "<repo>"),
            (socket.gethostname(), "<hostname>"),
        ]
        literals += [(run_id, f"<run:{label}>") for run_id, label in self.labels.items()]
        if self.base_url:
            port = self.base_url.split(":")[-1].split("/")[0]
            literals.append((f"127.0.0.1:{port}", "127.0.0.1:<port>"))
        literals += [(folder, f"<package:{name}>") for name, folder in self.package_dirs()]
        return Normaliser(literals)

    def package_dirs(self) -> list[tuple[str, str]]:
        code = (
            "import importlib, json, os\n"
            "names = ['driftdesk', 'driftdesk.reruns', 'driftdesk.analysis', 'driftdesk.cli',"
            " 'driftdesk.tui', 'driftdesk.providers']\n"
            "out = {}\n"
            "for n in names:\n"
            "    try: out[n] = os.path.dirname(importlib.import_module(n).__file__)\n"
            "    except Exception: pass\n"
            "import sys\n"
            "if sys.prefix != sys.base_prefix: out['python-prefix'] = sys.prefix\n"
            "print(json.dumps(out))\n"
        )
        if not hasattr(self, "_packages"):
            found = subprocess.run(
                [self.python, "-I", "-c", code],  # -I: not a package folder in the cwd
                cwd=self.project,
                capture_output=True,
                text=True,
                check=True,
            )
            self._packages = sorted(json.loads(found.stdout).items())
        return self._packages

    # -- the runs --

    def start_sandbox(self, coding_suite: Path) -> None:
        self.sandbox = subprocess.Popen(
            [self.python, "-m", "driftdesk", "sandbox", "--seed", str(SANDBOX_SEED),
             "--latency-ms", "0", "--suite", "basic", "--suite", str(coding_suite)],
            cwd=self.project,
            env=self.env(True),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.sandbox.stdout is not None
        self.base_url = self.sandbox.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.stop_sandbox()
            raise SystemExit(f"the sandbox did not start: {self.base_url!r}")

    def stop_sandbox(self) -> None:
        if self.sandbox is not None and self.sandbox.poll() is None:
            self.sandbox.terminate()
            try:
                self.sandbox.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.sandbox.kill()
                self.sandbox.communicate()

    def new_run(self, label: str, before: set[str], printed: str) -> str:
        (made,) = {p.name for p in self.runs.iterdir()} - before
        self.labels[made] = label
        self.printed[label] = printed
        return made

    def run(self, label: str, *args: str) -> str:
        before = {p.name for p in self.runs.iterdir()}
        result = self.must("run", "--profile", "sim", "--concurrency", "1", "--timeout", "30",
                           "--out", str(self.runs), *args)  # fmt: skip
        return self.new_run(label, before, result.stdout)

    def import_results(self, label: str, fixture: str, *args: str) -> str:
        # A private copy with a fixed mtime: a zero-copy import keeps the source's identity.
        source = self.root / "fixtures" / fixture
        source.parent.mkdir(exist_ok=True)
        if not source.exists():
            shutil.copyfile(FIXTURES / fixture, source)
            os.utime(source, (1_700_000_000, 1_700_000_000))
        before = {p.name for p in self.runs.iterdir()}
        result = self.must("import", str(source), "--out", str(self.runs), *args)
        return self.new_run(label, before, result.stdout)

    def make_runs(self) -> None:
        self.printed: dict[str, str] = {}
        coding = write_coding_suite(self.root / "suites")
        self.start_sandbox(coding)
        try:
            self.must("profile", "add", "sim", "--protocol", "openai", "--base-url",
                      self.base_url, "--model", "simulated-model-1", "--no-key")  # fmt: skip
            self.run("basic", "--suite", "basic", "--repeat", "3", "--seed", "5")
            self.run("inject", "--suite", "basic", "--repeat", "2", "--seed", "11",
                     "--inject", "429=20%:0.01s")  # fmt: skip
            self.run("coding", "--suite", str(coding), "--repeat", "2", "--seed", "3")
            harness = write_command_harness(self.root / "harness.py")
            self.run("command", "--suite", "basic", "--tasks", "arith-01,arith-02,lookup-01",
                     "--repeat", "2", "--agent", "command",
                     "--command", f"{self.python} {harness} {{task_id}}")  # fmt: skip
            # Link errors left, then resumed: the resume writer, the last row per slot.
            resumed = self.run("resumed", "--suite", "basic", "--tasks",
                               "arith-01,arith-02,arith-03,arith-04", "--repeat", "2",
                               "--inject", "429=60%:0.01s", "--max-retries", "0", "--seed", "2")  # fmt: skip
            again = self.must("resume", str(self.runs / resumed), "--retry-link-errors")
            self.printed["resumed"] += again.stdout
            self.run("adaptive", "--suite", "basic", "--tasks", "arith-01,arith-02,arith-03",
                     "--adaptive", "--target", "volatile", "--max-repeats", "6")  # fmt: skip
        finally:
            self.stop_sandbox()
        self.import_results("tau", "tau_bench_retail_results.json", "--format", "tau-bench",
                            "--run-id", "imported-tau")  # fmt: skip
        self.import_results("jsonl-copy", "generic_results.jsonl", "--format", "jsonl", "--copy",
                            "--run-id", "imported-jsonl-copy")  # fmt: skip
        self.import_results("jsonl-zero", "generic_results.jsonl", "--format", "jsonl",
                            "--run-id", "imported-jsonl-zero")  # fmt: skip

    def run_dir(self, label: str) -> str:
        (run_id,) = [r for r, known in self.labels.items() if known == label]
        return str(self.runs / run_id)

    # -- the analysis outputs --

    def analysis_commands(self) -> list[tuple[str, list[str], bool]]:
        """(name, arguments, figures measured by this machine?) of each output kept."""
        basic, inject, coding, adaptive = (
            self.run_dir(x) for x in ("basic", "inject", "coding", "adaptive")
        )
        command, resumed = self.run_dir("command"), self.run_dir("resumed")
        tau, copy, zero = (self.run_dir(x) for x in ("tau", "jsonl-copy", "jsonl-zero"))
        volatile = self.volatile_task(basic)
        retried = self.retried_task(Path(inject))
        json_report = ["--format", "json"]
        return [
            ("report-basic", ["report", basic, *json_report], True),
            ("report-basic-curves", ["report", basic, *json_report, "--task-curves"], True),
            ("report-basic-csv", ["report", basic, "--format", "csv"], True),
            ("report-inject", ["report", inject, *json_report], True),
            (
                "report-inject-errors",
                ["report", inject, *json_report, "--include-link-errors"],
                True,
            ),
            ("report-coding", ["report", coding, *json_report], True),
            ("report-adaptive", ["report", adaptive, *json_report], True),
            ("report-command", ["report", command, *json_report], True),
            ("report-resumed", ["report", resumed, *json_report], True),
            ("report-basic-inject", ["report", basic, inject, *json_report], True),
            ("report-tau", ["report", tau, *json_report], False),
            ("report-jsonl-copy", ["report", copy, *json_report], False),
            ("report-jsonl-zero", ["report", zero, *json_report], False),
            ("compare-basic-inject", ["compare", basic, inject, "--format", "json"], True),
            (
                "compare-basic-adaptive-all",
                ["compare", basic, adaptive, "--format", "json", "--all-tasks"],
                True,
            ),
            (
                "trend-basic",
                ["trend", "--runs", str(self.runs), "--suite", "basic", "--json"],
                True,
            ),
            (
                "trend-basic-all-agents",
                ["trend", "--runs", str(self.runs), "--suite", "basic", "--agent", "all", "--json"],
                True,
            ),
            (
                "check-basic-trend",
                ["check", basic, "--trend", "--runs", str(self.runs), "--format", "json"],
                True,
            ),
            ("explain-basic-volatile", ["explain", basic, volatile, "--json"], True),
            ("explain-inject-retried", ["explain", inject, retried, "--json"], True),
            (
                "check-basic",
                ["check", basic, "--min-success", "50%", "--max-gap", "30", "--format", "json"],
                True,
            ),
            (
                "check-inject-baseline",
                [
                    "check",
                    inject,
                    "--baseline",
                    basic,
                    "--max-link-error-rate",
                    "5%",
                    "--format",
                    "json",
                ],
                True,
            ),
        ]

    def volatile_task(self, run_dir: str) -> str:
        report = json.loads(self.must("report", run_dir, "--format", "json").stdout)
        return sorted(t["task_id"] for t in report["tasks"] if t.get("volatile"))[0]

    def retried_task(self, run_dir: Path) -> str:
        rows = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
        return sorted(r["task_id"] for r in rows if r.get("retries"))[0]

    def keep_output(
        self, folder: Path, name: str, result: subprocess.CompletedProcess[str], figures: bool
    ) -> None:
        normaliser = self.normaliser()
        folder.mkdir(parents=True, exist_ok=True)
        layout = "not JSON"
        try:
            value = json.loads(result.stdout)
        except json.JSONDecodeError:
            if name.endswith("-csv"):
                body, layout = normalise_csv(result.stdout, normaliser, figures)
            else:
                body = normaliser.text(result.stdout)
            (folder / f"{name}.txt").write_text(body, encoding="utf-8")
        else:
            layout = _layout_of(result.stdout, value)
            body = json.dumps(normaliser.json(value, figures=figures), indent=1, ensure_ascii=False)
            (folder / f"{name}.json").write_text(body + "\n", encoding="utf-8")
        meta = [
            f"exit code: {result.returncode}",
            f"stdout layout: {layout}",
            "stderr:",
            normaliser.text(result.stderr),
        ]
        (folder / f"{name}.meta").write_text("\n".join(meta), encoding="utf-8")

    def analyse(self) -> None:
        commands = self.analysis_commands()
        for mode, cache in (("nocache", False), ("cold", True), ("warm", True)):
            for name, args, figures in commands:
                result = self.cli(*args, cache=cache)
                self.keep_output(self.out / "outputs" / mode, name, result, figures)

    # -- the whole snapshot --

    def take(self) -> None:
        started = time.monotonic()
        try:
            self.make_runs()
            normaliser = self.normaliser()
            for run_id, label in sorted(self.labels.items(), key=lambda p: p[1]):
                figures = label not in ("tau", "jsonl-copy", "jsonl-zero")
                snapshot_tree(self.runs / run_id, self.out / "runs" / label, normaliser, figures)
                printed = self.out / "outputs" / "runs" / f"{label}.txt"
                printed.parent.mkdir(parents=True, exist_ok=True)
                printed.write_text(normaliser.text(self.printed[label]), encoding="utf-8")
            self.analyse()
            self.hash_checked_in()
            self.write_info(time.monotonic() - started)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def hash_checked_in(self) -> None:
        lines = []
        for folder in (REPO / "tests" / "analysis" / "golden", REPO / "screenshots"):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                    lines.append(f"{digest}  {path.relative_to(REPO)}")
        target = self.out / "hashes" / "golden-and-screenshots.sha256"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def write_info(self, seconds: float) -> None:
        info = self.out / INFO_DIR
        info.mkdir(parents=True, exist_ok=True)
        normaliser = self.normaliser()
        digest = re.compile(r"[0-9a-f]{16,}")
        caches = []
        for path in sorted(self.root.rglob("*")):
            relative = path.relative_to(self.root)
            if path.is_file() and is_cache(relative):
                caches.append(digest.sub("<digest>", normaliser.text(str(relative))))
        (info / "caches.txt").write_text("\n".join(caches) + "\n", encoding="utf-8")
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        (info / "commit.txt").write_text(f"{commit or 'unknown'}\n", encoding="utf-8")
        (info / "timings.txt").write_text(
            f"total {seconds:.1f}s\n" + "\n".join(normaliser.text(t) for t in self.timings) + "\n",
            encoding="utf-8",
        )


HARNESS = """\
import json, os, sys, urllib.request
# A command-agent harness: one call through the metering proxy; exit 0 (pass) on an answer of
# even length, 1 (fail) otherwise.
body = {"model": os.environ["DRIFTDESK_MODEL"],
        "messages": [{"role": "user", "content": os.environ["DRIFTDESK_PROMPT"]}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
    headers={"Content-Type": "application/json",
             "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
with urllib.request.urlopen(request, timeout=20) as response:
    answer = json.load(response)["choices"][0]["message"]["content"] or ""
print(sys.argv[1], "answered", repr(answer))
sys.exit(0 if len(answer) % 2 == 0 else 1)
"""


def write_command_harness(path: Path) -> Path:
    path.write_text(HARNESS, encoding="utf-8")
    return path


def write_coding_suite(folder: Path) -> Path:
    """Tasks with a workspace, a setup and a check the builtin agent can do (it answers;
    the check reads its answer and the workspace)."""
    (folder / "ws").mkdir(parents=True, exist_ok=True)
    (folder / "ws" / "start.txt").write_text("start\n")

    def task(task_id: str, check: str, **more: str) -> dict[str, Any]:
        return {
            "task_id": task_id,
            "prompt": f"{task_id}: what is two plus two?",
            "expected": {"equals": "4"},
            "reference_answer": "4",
            "workspace": "ws",
            "check": check,
            **more,
        }

    tasks = [
        task("code-answer-kept", 'echo "$DRIFTDESK_ANSWER" > answer.txt; test -f start.txt'),
        task("code-check-fails", "echo 'start.txt is still here'; exit 1"),
        task("code-check-crashes", "echo broken check >&2; exit 125"),
        task(
            "code-setup",
            'test "$(cat state.txt)" = ready && rm start.txt',
            setup="echo ready > state.txt",
        ),
    ]
    path = folder / "coding.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return path


# --- comparing two snapshots ---------------------------------------------------------------


def _clipped(line: str, width: int = 400) -> str:
    return line if len(line) <= width else line[:width] + f" ... ({len(line) - width} more chars)"


def diff_snapshots(a: Path, b: Path, write: Callable[[str], object] = print) -> int:
    """Print the differences between two snapshots; 1 if any outside info/, else 0."""
    for folder in (a, b):
        if not (folder / "runs").is_dir():
            write(f"{folder} is not a snapshot (no runs/ in it)")
            return 2
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    failing = informative = 0
    for relative in sorted(files_a | files_b):
        only_info = relative.parts[0] == INFO_DIR
        if relative not in files_b:
            message = [f"only in A: {relative}"]
        elif relative not in files_a:
            message = [f"only in B: {relative}"]
        else:
            text_a = (a / relative).read_text(encoding="utf-8", errors="replace")
            text_b = (b / relative).read_text(encoding="utf-8", errors="replace")
            if text_a == text_b:
                continue
            lines = list(
                difflib.unified_diff(
                    text_a.splitlines(), text_b.splitlines(),
                    f"A/{relative}", f"B/{relative}", n=1, lineterm="",
                )
            )  # fmt: skip
            shown = [_clipped(line) for line in lines[:24]]
            if len(lines) > len(shown):
                shown.append(f"... ({len(lines) - len(shown)} more diff lines)")
            message = [f"differs: {relative}", *shown]
        if only_info:
            informative += 1
            message = ["(info, not a failure) " + message[0]]
        else:
            failing += 1
        write("\n".join(message))
    write(
        f"{failing} file(s) differ"
        + (f", {informative} info file(s) differ" if informative else "")
        if failing or informative
        else "identical"
    )
    return 1 if failing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, help="folder for the snapshot (new or empty)")
    parser.add_argument("--diff", nargs=2, type=Path, metavar=("A", "B"), help="compare two")
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter whose driftdesk to run"
    )
    args = parser.parse_args(argv)
    if args.diff:
        return diff_snapshots(*args.diff)
    if args.out is None:
        parser.error("give OUT_DIR, or --diff A B")
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    Snapshot(args.out.resolve(), args.python).take()
    print(f"snapshot in {args.out} ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
