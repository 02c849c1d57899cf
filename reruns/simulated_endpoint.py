"""A simulated model endpoint that speaks what agents speak: OpenAI Chat Completions
(``/v1/chat/completions``), OpenAI Responses (``/v1/responses``) and Anthropic Messages
(``/v1/messages``, plus ``count_tokens``), streamed and not, with tool calls.

It is **simulated** and says so everywhere: the model id ``simulated-model-1``, an
``x-driftdesk-simulated: true`` header on every response, the answers' wording and the CLI's
startup banner.

What it plays (the built-in suites, or the suites given with ``suites=``):

- an answer task (``expected``): right with a fixed per-task skill (from a hash of its id), else
  a plausibly wrong answer — so repeated runs drift like a real model's; canned tools are called
  first;
- a coding task with ``simulated: {"commands": [...], "answer": "...", "skill": 0.7,
  "wrong": [...]}``: with probability ``skill`` the model runs ``commands`` one per turn through
  the **client's own shell tool** — whichever the request's tool list offers (Claude Code's
  ``Bash``, Codex's ``exec_command``, any tool taking a ``command``/``cmd``) — reading each tool
  result before the next call, and ends with ``answer``; otherwise it runs ``wrong`` (default:
  every command but the last) and ends the same way, so the task's check fails. The choice is
  made on the conversation's first turn and carried in the tool-call ids, so a conversation
  stays on one path whatever else runs at the same time;
- any other prompt: a plain answer that says it comes from a simulated model.

Drift can be played too: ``serve_model`` answers under another model name (and its own
``system_fingerprint``), as a gateway that routes a name elsewhere does; ``skill_shift``
subtracts a number from the pass probability of ``shift_tasks`` tasks (the ones it answers
right most often, a seeded draw by ``shift_seed`` among equals, the same whatever the run's
seed; None: every task),
so ``skill_shift=1`` with ``shift_tasks=5`` makes five tasks fail every time — a real
regression a trend must find.

Faults are injected at the given rates on all three protocols: 429 with Retry-After, 500, 401,
hangs past any timeout, truncated streams/bodies and empty answers. A request that carries
``X-Driftdesk-Attempt: task/attempt/try`` (the metering proxy sends it to loopback upstreams)
draws the model's choice from ``Random(f"{seed}:{task}:{attempt}:{turn}")`` (turn: the tool
calls the conversation already holds) and its fault and latency from the same key and the
number of times that turn was asked: the same attempt plays the same turns whatever arrives
around it, and whatever faults (or none) it met, so a run and its fault-free twin can be
compared attempt by attempt. Without the header every draw comes from
``Random(f"{seed}:{task}:{n}")`` (n = the task's request count).

A rate limit can be played (``rate_limit=RateLimit(rps=20, burst=5, tpm=...)``, per key,
reruns/rate_limit.py): past it a 429 with Retry-After, and the rate-limit headers OpenAI and
Anthropic send on every answer.

``SandboxServer(...).start()`` runs it in a background thread and returns its base URL.

What requests and answers look like is ``driftdesk.wire``'s (``wire.conversation`` reads a
request, ``wire.answers`` writes the answer, ``wire.errors`` the errors); this module is the
simulated model and the endpoint that plays it (its rate limit is reruns/rate_limit.py's).
It stays near 700 lines because the two share the seeded draws (a request's fault and the
model's choice come from one key), which is clearer kept in one place than split across two
modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from driftdesk.reruns.rate_limit import RateLimit, RateLimiter
from driftdesk.reruns.suites import Task, builtin_suites, load_suite
from driftdesk.wire.answers import (
    Answer,
    chat_answer,
    count_tokens_answer,
    messages_answer,
    models_list,
    responses_answer,
)
from driftdesk.wire.conversation import (
    Conversation,
    ToolCall,
    chat_conversation,
    messages_conversation,
    parse_arguments,
    responses_conversation,
)
from driftdesk.wire.errors import simulated_error

SIM_MODEL = "simulated-model-1"
SIM_HEADER = "x-driftdesk-simulated"
ATTEMPT_HEADER = "X-Driftdesk-Attempt"  # task/attempt/try, set by the metering proxy
# Where a request keeps its rate-limit headers (a typed key where aiohttp has them, 3.12+).
_RATE_HEADERS: Any = (
    web.RequestKey("driftdesk_rate_headers", dict)
    if hasattr(web, "RequestKey")
    else "driftdesk_rate_headers"
)
BANNER = (
    "driftdesk sandbox: a SIMULATED model ({model}), not a real provider. It plays {what} "
    "and injects faults at the rates you set."
)
UNKNOWN_TASK_ANSWER = (
    f"[simulated] This is {SIM_MODEL}, a simulated model served by the driftdesk sandbox: it "
    "does not know this task, so this answer is a placeholder."
)
DEFAULT_CODING_ANSWER = "[simulated] Done."
# Tool-call ids the simulated model gives its shell calls: ``sim`` + r(ight)/w(rong) + step.
_SIM_CALL = re.compile(r"^(?:call_|toolu_)?sim([rw])(\d+)_")
# Shell tools, most specific first; any other tool taking a command string or argv also works.
_SHELL_TOOL_NAMES = ("Bash", "exec_command", "shell_command", "shell", "local_shell")


@dataclass(frozen=True)
class FaultRates:
    rate_limit: float = 0.0  # 429 with Retry-After
    server_error: float = 0.0  # 500
    auth_error: float = 0.0  # 401
    timeout: float = 0.0  # hang until the client gives up
    truncate: float = 0.0  # stream (or body) cut short
    empty: float = 0.0  # a finished, empty answer

    def total(self) -> float:
        return (
            self.rate_limit
            + self.server_error
            + self.auth_error
            + self.timeout
            + self.truncate
            + self.empty
        )


def fingerprint_of(model: str) -> str:
    """The ``system_fingerprint`` the sandbox gives answers of ``model`` (fixed per name)."""
    return "fp_sim_" + hashlib.sha256(model.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class SkillShift:
    """A drop in skill: ``amount`` subtracted from the pass probability of the tasks in
    ``tasks`` (None: all)."""

    amount: float = 0.0
    tasks: frozenset[str] | None = None

    def skill(self, task_id: str, skill: float) -> float:
        if not self.amount or (self.tasks is not None and task_id not in self.tasks):
            return skill
        return min(1.0, max(0.0, skill - self.amount))


def shifted_tasks(skills: dict[str, float], count: int, seed: int = 0) -> frozenset[str]:
    """``count`` of the tasks (task id -> skill) the model answers right most often: a seeded
    draw among equals, so a shift of 1 turns five always-right tasks into five failures (a
    drop a trend must find) rather than five it mostly failed anyway."""
    rng = random.Random(f"shift:{seed}")
    ranked = sorted(sorted(skills), key=lambda t: (-skills[t], rng.random()))
    return frozenset(ranked[:count])


def task_skill(task_id: str) -> float:
    """The simulated chance of answering ``task_id`` right (fixed per task)."""
    u = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if u < 0.4:
        return 1.0  # always right
    if u < 0.75:
        return 0.5 + (u - 0.4)  # flaky: 0.5 .. 0.85
    return 0.1 + (u - 0.75) * 0.8  # mostly wrong: 0.1 .. 0.3


def _wrong_answer(reference: str, rng: random.Random) -> str:
    number = re.fullmatch(r"-?\d+(\.\d+)?", reference.strip())
    if number:
        delta = rng.choice([1, -1, 2, 10])
        if number.group(1):
            places = len(number.group(1)) - 1
            return f"{float(reference) + delta / 10**places:.{places}f}"
        return str(int(reference) + delta)
    return rng.choice(["I am not sure.", reference[::-1], reference + " (approximately)"])


def _reference_of(task: Task) -> str:
    """A right answer: the task's ``reference_answer``, else one its ``expected`` accepts."""
    if task.reference_answer is not None:
        return str(task.reference_answer)
    kind, want = next(iter(task.expected.items())) if task.expected else ("", "")
    if kind in ("equals", "contains"):
        return str(want)
    if kind == "one_of" and want:
        return str(want[0])
    if kind == "json_equals":
        return json.dumps(want)
    return ""


def shell_tool(
    tools: Iterable[tuple[str, dict[str, Any]]],
) -> tuple[str, Callable[[str], dict[str, Any]]] | None:
    """The client's own shell tool and how to call it with a command line, read from the
    tool's JSON schema: a ``command``/``cmd`` string, or an argv array (``bash -lc``)."""
    offered = list(tools)
    ranked = sorted(
        offered,
        key=lambda t: _SHELL_TOOL_NAMES.index(t[0]) if t[0] in _SHELL_TOOL_NAMES else 99,
    )
    for name, schema in ranked:
        properties = schema.get("properties") or {}
        for key in ("command", "cmd"):
            spec = properties.get(key)
            if not isinstance(spec, dict):
                continue
            extra = {"description": "simulated step"} if "description" in properties else {}
            if spec.get("type") == "array":
                return name, lambda c, k=key, e=extra: {k: ["bash", "-lc", c], **e}
            if spec.get("type") in ("string", None):
                return name, lambda c, k=key, e=extra: {k: c, **e}
    return None


@dataclass
class Action:
    """The simulated model's turn: tool calls, or a final text."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)


class SimulatedModel:
    """Decides each turn from the conversation alone (and a seeded draw)."""

    def __init__(self, tasks: Iterable[Task], shift: SkillShift | None = None) -> None:
        self.shift = shift or SkillShift()
        self._by_prompt: dict[str, Task] = {}
        for task in tasks:
            prompt = task.prompt_text.strip()
            if prompt:
                self._by_prompt.setdefault(prompt, task)
        # Longest first, so a prompt that contains another's is matched as itself.
        self._prompts = sorted(self._by_prompt, key=len, reverse=True)

    def identify(self, conv: Conversation) -> Task | None:
        """The task whose prompt is one of the user's text blocks (or is inside one: clients
        wrap the prompt in their own context)."""
        texts = [t.strip() for t in conv.user_texts]
        for text in texts:
            if text in self._by_prompt:
                return self._by_prompt[text]
        for prompt in self._prompts:
            if any(prompt in text for text in texts):
                return self._by_prompt[prompt]
        return None

    def play(self, task: Task | None, conv: Conversation, rng: random.Random) -> Action:
        if task is None:
            return Action(text=UNKNOWN_TASK_ANSWER)
        simulated = task.raw.get("simulated")
        if isinstance(simulated, dict):
            return self._code(task, simulated, conv, rng)
        if task.tools and not conv.results:
            canned = [
                (tool.name, parse_arguments(key))
                for tool in task.tools
                for key in tool.results
                if key != "*"
            ]
            calls = [
                ToolCall(f"call_{i}_{rng.randrange(16**6):06x}", name, arguments)
                for i, (name, arguments) in enumerate(canned)
            ]
            if calls:
                return Action(calls=calls)
        reference = _reference_of(task)
        right = rng.random() < self.shift.skill(task.task_id, task_skill(task.task_id))
        return Action(text=reference if right else _wrong_answer(reference, rng))

    def _code(
        self, task: Task, simulated: dict[str, Any], conv: Conversation, rng: random.Random
    ) -> Action:
        answer = str(simulated.get("answer") or DEFAULT_CODING_ANSWER)
        shell = shell_tool(conv.tools)
        if shell is None:  # a side request of the client (a title, a summary): no shell tool
            return Action(text=answer)
        commands = [str(c) for c in simulated.get("commands") or []]
        wrong = simulated.get("wrong")
        if isinstance(wrong, list):
            wrong_commands = [str(c) for c in wrong]
        elif len(commands) > 1:
            wrong_commands = commands[:-1]
        else:
            wrong_commands = ["echo '[simulated] left the task undone'"]
        mine = [m for m in (_SIM_CALL.match(c.id) for c in conv.calls) if m]
        if mine:
            right = mine[0].group(1) == "r"
        else:
            skill = float(simulated.get("skill", task_skill(task.task_id)))
            right = rng.random() < self.shift.skill(task.task_id, skill)
        script = commands if right else wrong_commands
        step = len(mine)
        if step >= len(script):
            return Action(text=answer)
        name, arguments = shell
        call_id = f"sim{'r' if right else 'w'}{step}_{rng.randrange(16**8):08x}"
        return Action(calls=[ToolCall(call_id, name, arguments(script[step]))])


def base_skill(task: Task) -> float:
    """The chance the simulated model gets ``task`` right, before any shift."""
    simulated = task.raw.get("simulated")
    if isinstance(simulated, dict) and "skill" in simulated:
        with contextlib.suppress(TypeError, ValueError):
            return float(simulated["skill"])
    return task_skill(task.task_id)


def _load_tasks(suites: Iterable[str | Path] | None) -> list[Task]:
    names: list[str | Path] = list(suites) if suites else list(builtin_suites())
    return [task for name in names for task in load_suite(name).tasks]


def tasks_it_did_not_know(run_dir: Path, rows: list[dict[str, Any]] | None = None) -> list[str]:
    """The tasks of a finished run whose answers were this sandbox's placeholder: it was
    started without the run's suite (``driftdesk sandbox --suite FILE``), so they all fail
    (``rows``: its attempt rows, when the caller has read them already)."""
    from driftdesk.reruns.rundir import attempt_paths, read_attempt_rows
    from driftdesk.rundir import latest_rows

    unknown: set[str] = set()
    if rows is None:
        rows = read_attempt_rows(run_dir, [])
    for task_id, attempt in latest_rows(rows):
        log, _ = attempt_paths(run_dir, task_id, attempt)
        with contextlib.suppress(OSError):
            if UNKNOWN_TASK_ANSWER in log.read_text(errors="replace"):
                unknown.add(task_id)
    return sorted(unknown)


@dataclass
class SandboxStats:
    requests: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    by_path: Counter[str] = field(default_factory=Counter)
    authorizations: list[str] = field(default_factory=list)  # what callers sent (tests check)
    api_keys: list[str] = field(default_factory=list)  # x-api-key headers (Messages callers)
    # Model requests being answered now, and the most at once since ``peak`` was last reset
    # (what a concurrency limit is checked against).
    in_flight: int = 0
    peak: int = 0


class SandboxEndpoint:
    """The aiohttp application; use ``SandboxServer`` to run it."""

    def __init__(
        self,
        *,
        seed: int = 0,
        latency_ms: float = 0.0,
        faults: FaultRates | None = None,
        retry_after_s: float = 1.0,
        hang_s: float = 3600.0,
        linger_s: float = 0.0,
        suites: Iterable[str | Path] | None = None,
        serve_model: str | None = None,
        skill_shift: float = 0.0,
        shift_tasks: int | None = None,
        shift_seed: int = 0,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self.seed = seed
        self.limiter = RateLimiter(rate_limit) if rate_limit and rate_limit.active else None
        # The name answers carry (a gateway routing the asked name elsewhere), and its own
        # fingerprint; by default the simulated model's.
        self.served_model = serve_model or SIM_MODEL
        self.fingerprint = fingerprint_of(self.served_model)
        # A stream stays open this long after its last event before it ends, as a gateway's
        # keep-alives hold it: a client that hangs up at the protocol's end does so first.
        self.linger_s = linger_s
        self.latency_s = latency_ms / 1000.0
        self.faults = faults or FaultRates()
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.stats = SandboxStats()
        self._per_task: Counter[str] = Counter()
        self._per_turn: Counter[tuple[str, str, int]] = Counter()
        tasks = _load_tasks(suites)
        chosen = (
            None
            if shift_tasks is None
            else shifted_tasks({t.task_id: base_skill(t) for t in tasks}, shift_tasks, shift_seed)
        )
        self.shifted = chosen
        self.model = SimulatedModel(tasks, SkillShift(skill_shift, chosen))

    @web.middleware
    async def _count_in_flight(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        if request.method != "POST" or request.path.endswith("count_tokens"):
            return await handler(request)
        self.stats.in_flight += 1
        self.stats.peak = max(self.stats.peak, self.stats.in_flight)
        try:
            response: web.StreamResponse = await handler(request)
            return response
        finally:
            self.stats.in_flight -= 1

    def app(self) -> web.Application:
        app = web.Application(
            client_max_size=64 * 1024 * 1024,  # agents send long contexts
            middlewares=[self._count_in_flight],
        )
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        return app

    @staticmethod
    def _headers(request: web.Request | None = None) -> dict[str, str]:
        headers = {SIM_HEADER: "true"}
        if request is not None:
            headers.update(request.get(_RATE_HEADERS) or {})
        return headers

    async def _models(self, request: web.Request) -> web.Response:
        listed = models_list(SIM_MODEL, "driftdesk-sandbox (simulated)")
        return web.json_response(listed, headers=self._headers())

    # --- the shared turn: parse, draw a fault, play ------------------------------------------

    def _error(
        self, name: str, anthropic: bool, request: web.Request | None = None
    ) -> web.Response:
        status, body = simulated_error(name, anthropic)
        headers = self._headers(request)
        if status == 429 and "Retry-After" not in headers:
            headers["retry-after-ms"] = str(int(self.retry_after_s * 1000))
            headers["Retry-After"] = str(max(1, round(self.retry_after_s)))
        return web.json_response(body, status=status, headers=headers)

    async def _turn(
        self, request: web.Request, parse: Callable[[dict[str, Any]], Conversation], anthropic: bool
    ) -> tuple[dict[str, Any], Conversation, Action, str | None] | web.Response:
        """The request's body, conversation and the model's action (with the fault drawn),
        or an error response to send as is."""
        self.stats.requests += 1
        self.stats.by_path[request.path] += 1
        self.stats.authorizations.append(request.headers.get("Authorization", ""))
        self.stats.api_keys.append(request.headers.get("x-api-key", ""))
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            return self._error("bad_json", anthropic)
        conv = parse(body)
        task = self.model.identify(conv)
        if self.limiter is not None:
            headers = request.headers
            caller = headers.get("Authorization") or headers.get("x-api-key") or ""
            verdict = self.limiter.admit(caller, conv.size // 4 + 8)
            request[_RATE_HEADERS] = verdict.headers
            if not verdict.allowed:
                self.stats.by_kind["rate_limited"] += 1
                return self._error("rate_limit", anthropic, request)
        key = task.task_id if task else "(unknown)"
        rng, play_rng = self._draws(key, request.headers.get(ATTEMPT_HEADER), len(conv.calls))
        if self.latency_s:
            await asyncio.sleep(self.latency_s * (0.5 + rng.random()))
        fault = self._draw_fault(rng)
        self.stats.by_kind[fault or "ok"] += 1
        if fault in ("rate_limit", "server_error", "auth_error"):
            return self._error(fault, anthropic, request)
        if fault == "timeout":
            await asyncio.sleep(self.hang_s)
            return self._error("timeout", anthropic, request)
        action = Action() if fault == "empty" else self.model.play(task, conv, play_rng)
        return body, conv, action, fault

    def _draws(
        self, task_key: str, attempt_header: str | None, turn: int
    ) -> tuple[random.Random, random.Random]:
        """The request's draws: (fault and latency, the model's choice). Keyed on (task,
        attempt, turn) when the proxy says which attempt asks, so arrival order and faults
        change nothing the model plays; else on the task's request count, as before."""
        parts = (attempt_header or "").rsplit("/", 2)
        if len(parts) == 3 and parts[1].isdigit():
            task_id, attempt = urllib.parse.unquote(parts[0]), parts[1]
            asked = self._per_turn[(task_id, attempt, turn)]
            self._per_turn[(task_id, attempt, turn)] += 1
            base = f"{self.seed}:{task_id}:{attempt}:{turn}"
            return random.Random(f"{base}:{asked}"), random.Random(base)
        n = self._per_task[task_key]
        self._per_task[task_key] += 1
        rng = random.Random(f"{self.seed}:{task_key}:{n}")
        return rng, rng

    def _draw_fault(self, rng: random.Random) -> str | None:
        draw = rng.random()
        for name in ("rate_limit", "server_error", "auth_error", "timeout", "truncate", "empty"):
            rate = getattr(self.faults, name)
            if draw < rate:
                return name
            draw -= rate
        return None

    @staticmethod
    def _usage(conv: Conversation, action: Action) -> tuple[int, int]:
        prompt = conv.size // 4 + 8
        completion = (
            len(action.text) + sum(len(json.dumps(c.arguments)) for c in action.calls)
        ) // 4 + 1
        return prompt, completion

    @staticmethod
    def _cut(request: web.Request) -> None:
        # Drop the connection mid-body, as a dying upstream would.
        if request.transport is not None:
            request.transport.close()

    async def _send_whole(
        self, request: web.Request, payload: dict[str, Any], truncate: bool
    ) -> web.StreamResponse:
        raw = json.dumps(payload).encode()
        if not truncate:
            return web.Response(
                body=raw, content_type="application/json", headers=self._headers(request)
            )
        response = web.StreamResponse(headers=self._headers(request))
        response.content_type = "application/json"
        response.content_length = len(raw)
        await response.prepare(request)
        await response.write(raw[: len(raw) // 2])
        self._cut(request)
        return response

    async def _send_events(
        self, request: web.Request, events: list[bytes], truncate: bool
    ) -> web.StreamResponse:
        """An SSE stream; truncated: about half the events, then the connection drops."""
        response = web.StreamResponse(headers=self._headers(request))
        response.content_type = "text/event-stream"
        await response.prepare(request)
        if truncate:
            events = events[: max(1, len(events) // 2)]
        for event in events:
            await response.write(event)
        if truncate:
            self._cut(request)
            return response
        if self.linger_s:
            await asyncio.sleep(self.linger_s)
        with contextlib.suppress(ConnectionResetError):  # the client hung up meanwhile
            await response.write_eof()
        return response

    def _answer(self, conv: Conversation, action: Action) -> Answer:
        prompt, completion = self._usage(conv, action)
        return Answer(
            action.text, action.calls, prompt, completion, self.served_model, self.fingerprint
        )

    async def _send(
        self, request: web.Request, out: dict[str, Any] | list[bytes], truncate: bool
    ) -> web.StreamResponse:
        if isinstance(out, dict):
            return await self._send_whole(request, out, truncate)
        return await self._send_events(request, out, truncate)

    # --- the three protocols ------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        turn = await self._turn(request, chat_conversation, anthropic=False)
        if isinstance(turn, web.Response):
            return turn
        body, conv, action, fault = turn
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        out = chat_answer(
            self._answer(conv, action),
            streamed=bool(body.get("stream")),
            include_usage=include_usage,
        )
        return await self._send(request, out, fault == "truncate")

    async def _count_tokens(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = {}
        conv = messages_conversation(body if isinstance(body, dict) else {})
        counted = count_tokens_answer(conv.size // 4 + 8)
        return web.json_response(counted, headers=self._headers())

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        turn = await self._turn(request, messages_conversation, anthropic=True)
        if isinstance(turn, web.Response):
            return turn
        body, conv, action, fault = turn
        out = messages_answer(self._answer(conv, action), streamed=bool(body.get("stream")))
        return await self._send(request, out, fault == "truncate")

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        turn = await self._turn(request, responses_conversation, anthropic=False)
        if isinstance(turn, web.Response):
            return turn
        body, conv, action, fault = turn
        out = responses_answer(self._answer(conv, action), streamed=bool(body.get("stream")))
        return await self._send(request, out, fault == "truncate")


class SandboxServer:
    """Runs a ``SandboxEndpoint`` on 127.0.0.1 in a background thread (or in your loop).

    ``base_url`` (``…/v1``) is what OpenAI clients take; ``root_url`` (no ``/v1``) is what
    Anthropic clients take (``ANTHROPIC_BASE_URL``)."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", **endpoint: Any) -> None:
        self.endpoint = SandboxEndpoint(**endpoint)
        self.host = host
        self.port = port
        self.base_url = ""
        self.root_url = ""
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def stats(self) -> SandboxStats:
        return self.endpoint.stats

    async def start_async(self) -> str:
        # handler_cancellation: a hung request ends when its client hangs up.
        self._runner = web.AppRunner(
            self.endpoint.app(), access_log=None, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.root_url = f"http://{self.host}:{self.port}"
        self.base_url = f"{self.root_url}/v1"
        return self.base_url

    async def stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> str:
        """Start in a background thread; returns the base URL (``http://127.0.0.1:PORT/v1``)."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop_async())
            loop.close()

        self._thread = threading.Thread(target=serve, name="driftdesk-sandbox", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self.base_url

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None
            self._loop = None

    def __enter__(self) -> SandboxServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
