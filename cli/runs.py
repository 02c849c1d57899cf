"""CLI sub-commands for the runs area: ``run``, ``resume``, ``sandbox``.

Handlers are thin and import their core lazily (fast start): the engine lives in ``reruns``.
What is said after a run is ``cli.after_run``. This module stays a little past 600 lines: its
``register`` holds the three commands' arguments, one concern read as the CLI's reference.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driftdesk.cli.after_run import (
    all_harness_errors,
    injection_line,
    manifest_or_empty,
    next_commands,
    nothing_to_resume,
    plural,
    read_once,
    sandbox_did_not_know,
    say_why_it_stopped,
    shown,
)
from driftdesk.terminal import printable, printable_path

if TYPE_CHECKING:
    from driftdesk.reruns.adaptive import AdaptiveDesign
    from driftdesk.reruns.events import RunEvent, RunListener
    from driftdesk.reruns.execution import RunOutcome

EXIT_SETUP_ERROR = 2
EXIT_ALL_LINK_ERRORS = 3  # the run ended, but no attempt reached the model
EXIT_ALL_HARNESS_ERRORS = 4  # the run ended, but the harness broke every attempt (none judged)
EXIT_INTERRUPTED = 130
DEFAULT_RETRY_DELAY_CAP_S = 30.0  # never more than the attempt timeout (min taken at use)


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's sub-commands to the top-level parser."""
    p = sub.add_parser(
        "run",
        help="run every task of a suite N times against a profile (metered, resumable)",
        description="Run a suite's tasks --repeat times each against a provider profile. "
        "Every provider call goes through a local metering proxy; each finished attempt is "
        "appended to <out>/<run_id>/attempts.jsonl.",
    )
    p.add_argument("--profile", required=True, help="provider profile name")
    p.add_argument("--suite", required=True, help="built-in suite name (basic) or a JSONL file")
    p.add_argument("--repeat", type=int, help="attempts per task (default 5)")
    adaptive = p.add_argument_group(
        "adaptive reruns",
        "instead of --repeat: a first round of --min-repeats per task, then each attempt to the "
        "task where it reduces uncertainty most, until --target holds or the budget is spent",
    )
    adaptive.add_argument("--adaptive", action="store_true", help="adaptive repeats")
    adaptive.add_argument("--min-repeats", type=int, help="first round per task (default 2)")
    adaptive.add_argument("--max-repeats", type=int, help="judged attempts per task at most (20)")
    adaptive.add_argument(
        "--target",
        help="ci=5pp: the success rate known to ± 5 pp (95 %%); volatile: every task classified "
        "always-pass, always-fail or volatile (default ci=5pp)",
    )
    budget = adaptive.add_mutually_exclusive_group()
    budget.add_argument("--budget-attempts", type=int, metavar="N", help="attempts at most")
    budget.add_argument("--budget-usd", type=float, metavar="X", help="cost at most (priced)")
    p.add_argument(
        "--concurrency",
        type=concurrency_argument,
        default=2,
        metavar="N|auto[:MIN-START-MAX]",
        help="attempts at once and model calls in flight (default 2, as in the workbench: "
        "gentle on a provider's rate limit; the demo runs 8 against its sandbox); auto: a "
        "controller finds what the provider allows (auto = auto:1-4-64); driftdesk ctl "
        "changes it while the run runs",
    )
    p.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per attempt try (default 120)"
    )
    p.add_argument(
        "--tasks",
        help="comma-separated task ids to run (default: all); escapes as `driftdesk tasks` "
        "prints them: \\\\, \\n, \\t, \\xNN (\\x2c a comma), \\uNNNN",
    )
    p.add_argument("--sample", type=int, help="run a seeded sample of N tasks")
    p.add_argument("--seed", type=int, default=0, help="seed for --sample (default 0)")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--only-failed", type=Path, metavar="RUN_DIR", help="tasks that failed there")
    only.add_argument(
        "--only-volatile", type=Path, metavar="RUN_DIR", help="tasks with mixed outcomes there"
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder for the run dir (default: ./runs, or $DRIFTDESK_RUNS_DIR; with "
        "--only-failed/--only-volatile, beside that run)",
    )
    p.add_argument(
        "--agent",
        choices=["builtin", "command", "claude-code", "codex", "inspect"],  # run_spec.AGENTS
        default="builtin",
        help="who does each attempt: driftdesk's own agent, your --command, the real Claude "
        "Code / Codex CLI run headless in a fresh workspace, or inspect (--suite is an inspect_ai "
        "task file path/task.py[@task], run once with --epochs REPEAT; its samples are the tasks)",
    )
    p.add_argument(
        "--command",
        dest="command_template",
        metavar="TEMPLATE",
        help="harness command for --agent command; placeholders {task_id} {attempt} {run_id} "
        "{model} {result_path}",
    )
    p.add_argument(
        "--isolate",
        action="store_true",
        help="run the harness (or the Claude Code / Codex client) under bubblewrap: no session "
        "bus, keyring files, home or other processes' /proc; writes only to its attempt folder "
        "(see docs/ARCHITECTURE.md)",
    )
    p.add_argument(
        "--pass-env",
        action="append",
        default=[],
        type=_pass_env_name,
        metavar="NAME",
        help="pass this variable of yours to the harness (repeatable; a glob such as AWS_* "
        "too): a harness gets only PATH, HOME, locale, terminal, temp and proxy settings "
        "otherwise (`driftdesk doctor` lists them). Resume keeps the names, never the values",
    )
    p.add_argument("--max-retries", type=int, default=4, help="link-error retries per attempt")
    p.add_argument(
        "--max-retry-delay",
        type=float,
        metavar="SECONDS",
        help="cap on one retry's wait, the server's Retry-After included; a server asking for "
        f"more is not retried (default: {DEFAULT_RETRY_DELAY_CAP_S:g} or the --timeout, "
        "whichever is less)",
    )
    p.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="run the suite without its unreadable lines (listed first) instead of refusing it",
    )
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="do not check the endpoint (as driftdesk doctor does) before the first attempt",
    )
    p.add_argument(
        "--no-bodies",
        action="store_true",
        help="keep no call recordings (what each provider call said, redacted, in "
        "attempts/<task>/<attempt>.calls.jsonl.gz); calls.jsonl is kept either way",
    )
    p.add_argument(
        "--max-recorded-mb",
        type=float,
        default=8.0,
        metavar="MB",
        help="cap on one attempt's call recording (MiB, compressed; default 8, 0: no cap); "
        "past it, records keep their figures without the text",
    )
    p.add_argument(
        "--inject",
        metavar="SPEC",
        help="inject faults at the proxy into that share of model calls, seeded by --seed per "
        "(task, attempt, call): 429=5%%,500=2%%,timeout=1%%,truncate=1%%,drop=1%%,slow=5%%:3s "
        "(429=5%%:2s sets its Retry-After; any 5xx; none: no faults, whatever the profile's "
        "inject setting says)",
    )
    p.add_argument(
        "--link-faults",
        choices=["absorb", "retry"],
        help="a 429/5xx/connection error/timeout before the answer's first byte: absorb (held "
        "at the proxy and the call sent again within --max-retry-delay and the timeout; the "
        "agent never sees it) or retry (the agent sees it; a try it ends is rerun whole). "
        "Default: the profile's link_faults, else absorb for claude-code, codex and command, "
        "retry for builtin and inspect (they retry the call themselves)",
    )
    _executor_arguments(p, default="local")
    p.set_defaults(func=cmd_run)

    r = sub.add_parser(
        "resume",
        help="complete a run's missing attempts (after a crash, kill or Ctrl-C)",
        description="Run exactly the (task, attempt) slots that have no row yet. With "
        "--retry-link-errors also rerun the slots whose latest row is a link_error "
        "(the new row is appended and supersedes the old one: the last row per slot wins). "
        "Call recordings follow the run's own --no-bodies / --max-recorded-mb.",
    )
    r.add_argument("run_dir", type=Path)
    r.add_argument("--retry-link-errors", action="store_true")
    r.add_argument(
        "--take-over",
        action="store_true",
        help="a run in a bucket: resume it though another machine's lock object holds it "
        "(that machine is gone)",
    )
    r.add_argument(
        "--concurrency",
        type=concurrency_argument,
        metavar="N|auto[:MIN-START-MAX]",
        help="override the run's concurrency",
    )
    r.add_argument(
        "--link-faults",
        choices=["absorb", "retry"],
        help="override the run's link-faults mode (recorded with the resume)",
    )
    r.add_argument("--no-probe", action="store_true", help="do not check the endpoint first")
    _executor_arguments(r, default=None)
    r.set_defaults(func=cmd_resume)

    s = sub.add_parser(
        "sandbox",
        help="a local SIMULATED model endpoint (Chat Completions, Responses, Messages)",
        description="Serve a simulated model (simulated-model-1) on /v1/chat/completions, "
        "/v1/responses and /v1/messages that plays the built-in suites (or --suite) with "
        "per-task skill, runs coding tasks' simulated commands through the client's own shell "
        "tool, and injects faults at the given rates. Not a real provider.",
    )
    s.add_argument(
        "--suite",
        action="append",
        dest="suites",
        metavar="SUITE",
        help="play this suite's tasks (a JSONL file or built-in name; repeatable); "
        "default: the built-in suites",
    )
    s.add_argument(
        "--port", type=_port, default=0, help="port on 127.0.0.1, 0-65535 (default 0: a free one)"
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--latency-ms", type=float, default=0.0, help="mean added latency")
    s.add_argument("--rate-limit-rate", type=float, default=0.0, help="share of 429s")
    s.add_argument("--server-error-rate", type=float, default=0.0, help="share of 500s")
    s.add_argument("--auth-error-rate", type=float, default=0.0, help="share of 401s")
    s.add_argument("--timeout-rate", type=float, default=0.0, help="share of hung requests")
    s.add_argument("--truncate-rate", type=float, default=0.0, help="share of truncated bodies")
    s.add_argument("--empty-rate", type=float, default=0.0, help="share of empty answers")
    s.add_argument("--retry-after", type=float, default=1.0, help="Retry-After on 429s (s)")
    limit = s.add_argument_group(
        "rate limit (per key: 429 with Retry-After past it, rate-limit headers on every answer)"
    )
    limit.add_argument("--rps", type=float, help="requests per second allowed")
    limit.add_argument("--burst", type=int, default=1, help="requests at once (default 1)")
    limit.add_argument("--tpm", type=int, help="tokens per minute allowed")
    d = s.add_argument_group("drift (what driftdesk trend should find)")
    d.add_argument(
        "--serve-model",
        metavar="NAME",
        help="answer under this model name (and its own system_fingerprint) instead of "
        "simulated-model-1, as a gateway routing the asked name elsewhere",
    )
    d.add_argument(
        "--skill-shift",
        type=float,
        default=0.0,
        metavar="X",
        help="subtract X (-1..1) from each shifted task's pass probability (1: they always fail)",
    )
    d.add_argument(
        "--shift-tasks",
        type=int,
        metavar="N",
        help="shift only N tasks, those it answers right most often (a seeded draw among "
        "equals, --shift-seed); "
        "default: every task",
    )
    d.add_argument("--shift-seed", type=int, default=0, help="seed of the --shift-tasks choice")
    s.set_defaults(func=cmd_sandbox)


def _executor_arguments(p: argparse.ArgumentParser, default: str | None) -> None:
    """--executor and its Ray settings (a resume defaults to the run's own, in its manifest)."""
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default=default,
        help="where attempts run: here (local, the default) or as Ray tasks on a cluster (ray; "
        "needs pip install 'driftdesk[ray]'); the metering proxy, the key and the run dir stay "
        "in this process" + ("" if default else "; default: the run's own"),
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="the cluster: auto (default: the one this machine belongs to), ray://HOST:PORT "
        "or HOST:PORT",
    )
    p.add_argument(
        "--ray-resources",
        metavar="JSON",
        help="what each attempt asks the cluster for, e.g. '{\"CPU\": 2}' (default: 1 CPU)",
    )


def _ray_settings(args: argparse.Namespace, base: Any = None) -> Any:
    """The Ray settings the arguments ask for (None: none given, for a resume)."""
    from driftdesk.reruns.ray_executor import RaySettings, parse_resources

    if args.ray_address is None and args.ray_resources is None and base is None:
        return None
    return RaySettings(
        address=args.ray_address or "auto", resources=parse_resources(args.ray_resources)
    )


def _pass_env_name(text: str) -> str:
    from driftdesk.providers.harness_env import pass_env_problem

    problem = pass_env_problem([text])
    if problem:
        raise argparse.ArgumentTypeError(problem.removeprefix("pass_env: "))
    return text


def _port(text: str) -> int:
    """A TCP port for argparse: a wrong one is a usage error (exit 2), not a bind() failure."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, not {port}")
    return port


def _drive(
    make: Callable[[RunListener], Awaitable[RunOutcome]], also: RunListener | None = None
) -> int:
    """Run an engine coroutine with a progress line (and ``also`` told every event: a run's
    publisher); Ctrl-C/SIGTERM interrupt it cleanly."""
    import asyncio
    import signal

    from driftdesk.providers.keys import KeyMissing, KeyringUnavailable
    from driftdesk.providers.profiles import ProfileError
    from driftdesk.reruns.preflight import EndpointCheckFailed
    from driftdesk.reruns.progress import TextProgress, status_line
    from driftdesk.reruns.run_spec import RunSetupError
    from driftdesk.reruns.rundir import RunDirBusy
    from driftdesk.reruns.suites import SuiteError, SuiteLinesUnreadable

    progress = TextProgress()
    listener: RunListener = progress if also is None else _Both(progress, also)

    async def main() -> RunOutcome:
        task = asyncio.current_task()
        assert task is not None
        # SIGINT is handled by asyncio.run (it cancels this task); SIGTERM does the same.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await make(listener)

    try:
        outcome = asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        where = printable_path(progress.run_dir) if progress.run_dir else "the run dir"
        print(
            f"\ninterrupted: in-flight attempts were cancelled and not recorded; finish with:\n"
            f"  driftdesk resume {where}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except SuiteLinesUnreadable as exc:
        print(printable(f"driftdesk: {exc}"), file=sys.stderr)
        print(
            f"nothing was run: fix those lines, or run again with --skip-bad-lines to run the "
            f"other {plural(exc.tasks_left, 'task')} without them",
            file=sys.stderr,
        )
        return EXIT_SETUP_ERROR
    except EndpointCheckFailed as exc:
        lines = [
            f"driftdesk: the run did not start: profile {exc.profile}'s endpoint failed its check"
        ]
        for check in exc.checks:  # an endpoint's answer may be quoted: shown inert
            lines.append(f"  {check.message}")
            if check.fix:
                lines.append(f"  fix: {check.fix}")
        lines.append(f"  every check: driftdesk doctor {exc.profile}   (skip this one: --no-probe)")
        print(printable("\n".join(lines)), file=sys.stderr)
        return EXIT_SETUP_ERROR
    except (
        ProfileError,
        KeyMissing,
        KeyringUnavailable,
        RunSetupError,
        RunDirBusy,
        SuiteError,
        FileNotFoundError,
        ValueError,
    ) as exc:
        print(printable(f"driftdesk: {exc}"), file=sys.stderr)
        return EXIT_SETUP_ERROR
    print(f"{outcome.status}: {printable_path(outcome.run_dir)}")
    if outcome.reason:
        print(printable(outcome.reason), file=sys.stderr)
    print(status_line(outcome.stats, bar=False))
    manifest = manifest_or_empty(outcome.run_dir)  # read once for everything said below
    attempt_rows = read_once(outcome.run_dir)  # so is attempts.jsonl, when a line needs it
    injected = injection_line(manifest, attempt_rows)
    if injected:
        print(injected)
    if outcome.status != "completed":
        return 1
    stats = outcome.stats
    link_errors = stats.by_outcome.get("link_error", 0)
    if stats.done and link_errors == stats.done:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(stats.link_errors.items()))
        profile = manifest.get("profile", "PROFILE")
        print(
            printable(
                f"driftdesk: every attempt ({stats.done}) was a link error ({kinds}): the model "
                f"was never reached, so this run measures nothing about it.\n"
                f"  check the endpoint: driftdesk doctor {profile}\n"
                f"  then retry those attempts: driftdesk resume {shown(outcome.run_dir)} "
                "--retry-link-errors"
            ),
            file=sys.stderr,
        )
        return EXIT_ALL_LINK_ERRORS
    harness_errors = stats.by_outcome.get("harness_error", 0)
    if harness_errors and link_errors + harness_errors == stats.done:
        print(
            printable(all_harness_errors(outcome.run_dir, stats.done, attempt_rows())),
            file=sys.stderr,
        )
        return EXIT_ALL_HARNESS_ERRORS
    unknown = sandbox_did_not_know(outcome.run_dir, manifest, attempt_rows())
    if unknown:
        print(printable(unknown), file=sys.stderr)
    print(next_commands(outcome.run_dir, manifest))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from driftdesk.reruns.injection import inject_problem
    from driftdesk.reruns.retry import RetryPolicy
    from driftdesk.reruns.run_spec import RunSpec
    from driftdesk.reruns.run_start import execute_run
    from driftdesk.taskids import parse_list

    problem = inject_problem(args.inject)
    if problem is not None:
        print(printable(f"driftdesk: {problem}"), file=sys.stderr)
        return EXIT_SETUP_ERROR
    try:
        ray = _ray_settings(args, base=True)
    except ValueError as exc:
        print(printable(f"driftdesk: {exc}"), file=sys.stderr)
        return EXIT_SETUP_ERROR
    try:
        design = _adaptive_design(args)
    except ValueError as exc:
        print(printable(f"driftdesk: {exc}"), file=sys.stderr)
        return EXIT_SETUP_ERROR
    spec = RunSpec(
        adaptive=design,
        profile=args.profile,
        suite=args.suite,
        repeat=5 if args.repeat is None else args.repeat,
        concurrency=args.concurrency,
        timeout_s=args.timeout,
        tasks=parse_list(args.tasks) if args.tasks else None,
        sample=args.sample,
        seed=args.seed,
        only_failed=args.only_failed,
        only_volatile=args.only_volatile,
        out_dir=_out_dir(args),
        agent=args.agent,
        command=args.command_template,
        isolate=args.isolate,
        pass_env=list(args.pass_env),
        retry_policy=RetryPolicy(
            max_retries=args.max_retries,
            max_delay_s=(
                min(DEFAULT_RETRY_DELAY_CAP_S, args.timeout)
                if args.max_retry_delay is None
                else args.max_retry_delay
            ),
        ),
        skip_bad_lines=args.skip_bad_lines,
        probe=not args.no_probe,
        executor=args.executor,
        ray=ray,
        record_bodies=not args.no_bodies,
        max_recorded_mb=args.max_recorded_mb,
        inject=args.inject,
        link_faults=args.link_faults,
    )
    return _drive(lambda progress: execute_run(spec, progress), getattr(args, "run_listener", None))


class _Both:
    """Two listeners told every event, in order."""

    def __init__(self, first: RunListener, second: RunListener) -> None:
        self.first, self.second = first, second

    def on_event(self, event: RunEvent) -> None:
        self.first.on_event(event)
        self.second.on_event(event)


def _adaptive_design(args: argparse.Namespace) -> AdaptiveDesign | None:
    """The adaptive design of the flags, None without --adaptive (``ValueError``, one line,
    for a bad combination)."""
    from driftdesk.reruns.adaptive import (
        DEFAULT_MAX_REPEATS,
        DEFAULT_MIN_REPEATS,
        DEFAULT_TARGET,
        AdaptiveDesign,
    )

    given = [
        flag
        for flag, value in (
            ("--min-repeats", args.min_repeats),
            ("--max-repeats", args.max_repeats),
            ("--target", args.target),
            ("--budget-attempts", args.budget_attempts),
            ("--budget-usd", args.budget_usd),
        )
        if value is not None
    ]
    if not args.adaptive:
        if given:
            raise ValueError(f"{given[0]} goes with --adaptive")
        return None
    if args.repeat is not None:
        raise ValueError(
            "--adaptive chooses the repeats: use --min-repeats/--max-repeats, not --repeat"
        )
    return AdaptiveDesign.parse(
        args.target or DEFAULT_TARGET,
        min_repeats=DEFAULT_MIN_REPEATS if args.min_repeats is None else args.min_repeats,
        max_repeats=DEFAULT_MAX_REPEATS if args.max_repeats is None else args.max_repeats,
        budget_attempts=args.budget_attempts,
        budget_usd=args.budget_usd,
    )


def _out_dir(args: argparse.Namespace) -> Path:
    """The one rule (shared with the TUI): ``--out``, else beside the run whose tasks are
    rerun, else ./runs."""
    from driftdesk import paths

    if args.out is not None:
        return Path(args.out)
    source = args.only_failed or args.only_volatile
    return paths.rerun_dir(source) if source is not None else paths.runs_dir()


def cmd_resume(args: argparse.Namespace) -> int:
    from driftdesk.reruns.run_start import resume_run

    done = nothing_to_resume(args.run_dir, args.retry_link_errors)
    if done:
        print(printable(done))
        return 0
    say_why_it_stopped(args.run_dir)
    try:
        ray = _ray_settings(args)
    except ValueError as exc:
        print(printable(f"driftdesk: {exc}"), file=sys.stderr)
        return EXIT_SETUP_ERROR
    return _drive(
        lambda progress: resume_run(
            args.run_dir,
            progress,
            retry_link_errors=args.retry_link_errors,
            concurrency=args.concurrency,
            link_faults=args.link_faults,
            probe=not args.no_probe,
            executor=args.executor,
            ray=ray,
        ),
        getattr(args, "run_listener", None),
    )


def concurrency_argument(text: str) -> Any:
    """``--concurrency``: a number, ``auto`` or ``auto:MIN-START-MAX``."""
    from driftdesk.reruns.concurrency import ConcurrencyError, parse_concurrency

    try:
        return parse_concurrency(text)
    except ConcurrencyError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--concurrency ")) from None


def cmd_sandbox(args: argparse.Namespace) -> int:
    import threading

    from driftdesk.reruns.simulated_endpoint import BANNER, SIM_MODEL, FaultRates, SandboxServer

    faults = FaultRates(
        rate_limit=args.rate_limit_rate,
        server_error=args.server_error_rate,
        auth_error=args.auth_error_rate,
        timeout=args.timeout_rate,
        truncate=args.truncate_rate,
        empty=args.empty_rate,
    )
    if not 0.0 <= faults.total() <= 1.0:
        print(
            "driftdesk: the fault rates must each be >= 0 and add up to at most 1", file=sys.stderr
        )
        return EXIT_SETUP_ERROR
    if not -1.0 <= args.skill_shift <= 1.0 or (
        args.shift_tasks is not None and args.shift_tasks < 0
    ):
        print("driftdesk: --skill-shift must be in -1..1 and --shift-tasks >= 0", file=sys.stderr)
        return EXIT_SETUP_ERROR
    from driftdesk.reruns.rate_limit import RateLimit, describe_rate_limit
    from driftdesk.reruns.suites import SuiteError

    rate_limit = RateLimit(rps=args.rps, burst=args.burst, tpm=args.tpm)
    if rate_limit.problem():
        print(f"driftdesk: {rate_limit.problem()}", file=sys.stderr)
        return EXIT_SETUP_ERROR
    try:
        server = SandboxServer(
            port=args.port,
            seed=args.seed,
            latency_ms=args.latency_ms,
            faults=faults,
            retry_after_s=args.retry_after,
            suites=args.suites,
            serve_model=args.serve_model,
            skill_shift=args.skill_shift,
            shift_tasks=args.shift_tasks,
            shift_seed=args.shift_seed,
            rate_limit=rate_limit,
        )
    except SuiteError as exc:
        print(printable(f"driftdesk: {exc}"), file=sys.stderr)
        return EXIT_SETUP_ERROR
    what = "the suites " + ", ".join(args.suites) if args.suites else "the built-in suites"
    # Everything after start() sits inside the try: a Ctrl-C at any point stops cleanly.
    try:
        try:
            base_url = server.start()
        except OSError as exc:
            import errno

            if exc.errno != errno.EADDRINUSE:
                raise
            print(
                f"driftdesk: port {args.port} on 127.0.0.1 is already in use: stop what listens "
                "there, or pick another --port (0 picks a free one)",
                file=sys.stderr,
            )
            return EXIT_SETUP_ERROR
        print(BANNER.format(model=SIM_MODEL, what=what), file=sys.stderr)
        if args.serve_model or args.skill_shift:
            shifted = (
                "every task"
                if server.endpoint.shifted is None
                else ", ".join(sorted(server.endpoint.shifted))
            )
            print(
                f"drift: answers name {server.endpoint.served_model}; skill shifted by "
                f"{args.skill_shift:g} on {shifted}",
                file=sys.stderr,
            )
        print(
            f"base URL: {base_url} (OpenAI: chat/completions, responses)   "
            f"{server.root_url} (Anthropic: /v1/messages)   model: {SIM_MODEL}   (Ctrl-C to stop)",
            file=sys.stderr,
        )
        if rate_limit.active:
            print(f"rate limit per key: {describe_rate_limit(rate_limit)}", file=sys.stderr)
        print(base_url, flush=True)
        forever = threading.Event()
        # Wake now and then so the main thread handles Ctrl-C at once, whichever thread the
        # kernel delivered the signal to.
        while not forever.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
