"""Suites: JSONL files, one task a line, and how a final answer is judged.

A task line::

    {"task_id": "arith-01", "scenario_id": null,          # scenario: AppWorld-style grouping
     "prompt": "..."  |  "messages": [{"role": ..., "content": ...}],
     "system": "...",                                      # optional system prompt
     "tools": [{"name": "get_rate", "description": "...",
                "parameters": {JSON schema},
                "results": {"{\\"currency\\":\\"eur\\"}": "0.92", "*": "unknown currency"}}],
     "max_turns": 4,                                       # optional, default 4
     "expected": {"equals": "383"},
     "reference_answer": "383"}                            # optional: a right answer (the sandbox
                                                           # endpoint plays it)

A task that changes files (see ``driftdesk.reruns.workspace``)::

    {"task_id": "fix-add", "prompt": "Fix add() in calc.py so the tests pass.",
     "workspace": "fixtures/calc",            # folder relative to the suite file, copied fresh
                                              # per attempt (none: an empty folder)
     "setup": "git init -q",                  # optional, run in the copy before the agent
     "check": "python -m pytest -q",          # run in the copy after it: 0 pass, 1-124 fail,
                                              # 125, 126+ or a signal: harness_error check_error
     "check_error_codes": [3, 4],             # optional: more exits meaning "could not judge"
     "simulated": {"commands": ["sed -i s/-/+/ calc.py"], "answer": "Fixed.", "skill": 0.7}}
                                              # optional: what the sandbox's simulated model does

Canned tool results are keyed by the call's arguments as canonical JSON (sorted keys, no
spaces, string values casefolded and stripped); ``"*"`` is the fallback for any other arguments.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from driftdesk.fileio import JsonlProblem, iter_jsonl

DEFAULT_MAX_TURNS = 4
EXPECTATION_KINDS = ("equals", "contains", "regex", "one_of", "json_equals")


class SuiteError(ValueError):
    """A suite that cannot be used: missing file, bad task lines, duplicate ids."""


class SuiteLinesUnreadable(SuiteError):
    """Lines of a suite file that are not a JSON object (broken JSON, a list, a comment).

    A run refuses such a suite unless told to leave the lines out: a task dropped without a
    word changes what the run measures."""

    def __init__(self, path: Path, problems: list[str], tasks_left: int) -> None:
        self.path = path
        self.problems = problems
        self.tasks_left = tasks_left
        count = len(problems)
        super().__init__(
            f"{count} line{'s' if count != 1 else ''} of suite {path} cannot be read:\n"
            + "\n".join(f"  {problem}" for problem in problems)
        )


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    results: dict[str, Any]

    def result_for(self, arguments: dict[str, Any]) -> str:
        key = canonical_arguments(arguments)
        if key in self.results:
            value = self.results[key]
        elif "*" in self.results:
            value = self.results["*"]
        else:
            value = f"error: no result for arguments {key}"
        return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class Task:
    task_id: str
    messages: list[dict[str, Any]]
    expected: dict[str, Any]
    scenario_id: str | None = None
    tools: tuple[Tool, ...] = ()
    max_turns: int = DEFAULT_MAX_TURNS
    reference_answer: str | None = None
    workspace: Path | None = None  # absolute: resolved against the suite file's folder
    setup: str | None = None
    check: str | None = None
    check_error_codes: tuple[int, ...] = ()  # exits of the check that mean "could not judge"
    # Variables (names or globs) the task's harness gets beyond the allow-list (secrets it
    # needs, e.g. HF_TOKEN): see driftdesk.providers.harness_env.
    pass_env: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def runnable_by_builtin(self) -> bool:
        return bool(self.messages) and bool(self.expected)

    @property
    def prompt_text(self) -> str:
        """The first user message's text (what the sandbox recognises a task by)."""
        for message in self.messages:
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                return str(message["content"])
        return ""


@dataclass
class Suite:
    name: str
    path: Path
    sha256: str
    tasks: list[Task]
    problems: list[JsonlProblem] = field(default_factory=list)
    # task_id -> Task, built on first use: a lookup per slot must not scan the suite
    # (100k tasks x repeats made set-up quadratic).
    _by_id: dict[str, Task] | None = field(default=None, init=False, repr=False, compare=False)

    def task(self, task_id: str) -> Task:
        if self._by_id is None or len(self._by_id) != len(self.tasks):
            self._by_id = {task.task_id: task for task in self.tasks}
        return self._by_id[task_id]

    @property
    def task_ids(self) -> list[str]:
        return [t.task_id for t in self.tasks]

    def bad_lines(self, skip: bool) -> list[str]:
        """Every unreadable line, numbered, with its reason. Raises ``SuiteLinesUnreadable``
        when there are any and ``skip`` is false; otherwise returns them (as notices)."""
        if self.problems and not skip:
            raise SuiteLinesUnreadable(self.path, self.problem_lines(), len(self.tasks))
        return [f"skipped suite {line}" for line in self.problem_lines()]

    def problem_lines(self) -> list[str]:
        return [f"line {p.line_number}: {p.message}" for p in self.problems]


def canonical_arguments(arguments: Any) -> str:
    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return value.strip().casefold()
        if isinstance(value, dict):
            return {str(k): norm(v) for k, v in value.items()}
        if isinstance(value, list):
            return [norm(v) for v in value]
        return value

    return json.dumps(norm(arguments), sort_keys=True, separators=(",", ":"))


def builtin_suites() -> dict[str, Path]:
    """Built-in suite names and their files (shipped as package data)."""
    root = resources.files(__name__)
    found: dict[str, Path] = {}
    for entry in root.iterdir():
        if entry.name.endswith(".jsonl"):
            found[entry.name.removesuffix(".jsonl")] = Path(str(entry))
    return dict(sorted(found.items()))


def resolve_suite_path(suite: str | Path) -> tuple[str, Path]:
    """``(name, path)`` for a built-in suite name or a path to a JSONL file."""
    builtins = builtin_suites()
    if isinstance(suite, str) and suite in builtins:
        return suite, builtins[suite]
    path = Path(suite).expanduser()
    if not path.is_file():
        known = ", ".join(builtins) or "none"
        raise SuiteError(f"no suite {str(suite)!r}: not a built-in suite ({known}) nor a file")
    return path.stem, path.resolve()


def _optional_command(row: dict[str, Any], key: str, where: str) -> str | None:
    value = row.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SuiteError(f"{where}: {key} must be a non-empty shell command string")
    return value


def _parse_workspace(row: dict[str, Any], where: str, base: Path | None) -> Path | None:
    value = row.get("workspace")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SuiteError(f"{where}: workspace must be a folder path (relative to the suite file)")
    folder = Path(value).expanduser()
    if not folder.is_absolute() and base is not None:
        folder = base / folder
    if not folder.is_dir():
        raise SuiteError(f"{where}: workspace {value!r} is not a folder ({folder})")
    return folder.resolve()


def _check_simulated(row: dict[str, Any], where: str) -> None:
    simulated = row.get("simulated")
    if simulated is None:
        return
    commands = simulated.get("commands") if isinstance(simulated, dict) else None
    wrong = simulated.get("wrong", []) if isinstance(simulated, dict) else None
    skill = simulated.get("skill", 0.5) if isinstance(simulated, dict) else None
    if (
        not isinstance(commands, list)
        or not all(isinstance(c, str) for c in commands)
        or not isinstance(wrong, list)
        or not all(isinstance(c, str) for c in wrong)
        or not isinstance(skill, int | float)
        or not 0.0 <= float(skill) <= 1.0
        or not isinstance(simulated.get("answer", ""), str)
    ):
        raise SuiteError(
            f'{where}: simulated must be {{"commands": [str, ...], "answer": str, '
            '"skill": 0..1, "wrong": [str, ...]}'
        )


def _parse_task(row: dict[str, Any], where: str, base: Path | None = None) -> Task:
    task_id = row.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise SuiteError(f"{where}: a task needs a non-empty string task_id")
    if "messages" in row:
        messages = row["messages"]
        if not isinstance(messages, list) or not messages:
            raise SuiteError(f"{where}: task {task_id!r}: messages must be a non-empty list")
    elif isinstance(row.get("prompt"), str):
        messages = [{"role": "user", "content": row["prompt"]}]
    else:
        messages = []  # fine for a command-agent suite; the builtin agent refuses it
    if isinstance(row.get("system"), str):
        messages = [{"role": "system", "content": row["system"]}, *messages]
    expected = row.get("expected") or {}  # optional for command-agent suites
    if (
        not isinstance(expected, dict)
        or len(expected) > 1
        or (expected and next(iter(expected)) not in EXPECTATION_KINDS)
    ):
        raise SuiteError(
            f"{where}: task {task_id!r}: expected must be one of "
            + ", ".join(f"{{{k!r}: ...}}" for k in EXPECTATION_KINDS)
        )
    if "regex" in expected:
        try:
            re.compile(expected["regex"])
        except re.error as exc:
            raise SuiteError(f"{where}: task {task_id!r}: bad regex: {exc}") from exc
    tools = []
    for spec in row.get("tools") or []:
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise SuiteError(f"{where}: task {task_id!r}: each tool needs a name")
        tools.append(
            Tool(
                name=spec["name"],
                description=str(spec.get("description", "")),
                parameters=dict(spec.get("parameters") or {"type": "object", "properties": {}}),
                results=dict(spec.get("results") or {}),
            )
        )
    scenario = row.get("scenario_id")
    here = f"{where}: task {task_id!r}"
    _check_simulated(row, here)
    return Task(
        task_id=task_id,
        messages=messages,
        expected=expected,
        scenario_id=str(scenario) if scenario else None,
        tools=tuple(tools),
        max_turns=_max_turns(row.get("max_turns", DEFAULT_MAX_TURNS), where, task_id),
        reference_answer=row.get("reference_answer"),
        workspace=_parse_workspace(row, here, base),
        setup=_optional_command(row, "setup", here),
        check=_optional_command(row, "check", here),
        check_error_codes=_check_error_codes(row, here),
        pass_env=_pass_env(row, here),
        raw=row,
    )


def _pass_env(row: dict[str, Any], where: str) -> tuple[str, ...]:
    from driftdesk.providers.harness_env import pass_env_problem

    value = row.get("pass_env")
    if value is None:
        return ()
    problem = pass_env_problem(value)
    if problem:
        raise SuiteError(f"{where}: {problem}")
    return tuple(value)


def _check_error_codes(row: dict[str, Any], where: str) -> tuple[int, ...]:
    """``check_error_codes``: exits from 1 to 124 that mean the check could not judge (e.g.
    pytest's 3 and 4); 0 passes and 125 and above already mean it."""
    value = row.get("check_error_codes")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= 124 for c in value
    ):
        raise SuiteError(
            f"{where}: check_error_codes must be a list of exit codes from 1 to 124 (0 passes; "
            f"125 and above already mean check_error), not {json.dumps(value)[:60]}"
        )
    if row.get("check") is None:
        raise SuiteError(f"{where}: check_error_codes needs a check")
    return tuple(sorted(set(value)))


def _max_turns(value: Any, where: str, task_id: str) -> int:
    if value is None:
        return DEFAULT_MAX_TURNS
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise SuiteError(
            f"{where}: task {task_id!r}: max_turns must be a whole number from 1 to 1000, "
            f"not {json.dumps(value)[:60]}"
        )
    return value


def load_suite(suite: str | Path) -> Suite:
    """Load a suite by built-in name or path. Malformed lines are skipped and listed in
    ``Suite.problems`` (with line numbers); a task line that parses but is invalid is an error."""
    name, path = resolve_suite_path(suite)
    data = path.read_bytes()
    problems: list[JsonlProblem] = []
    tasks: list[Task] = []
    seen: set[str] = set()
    for number, row in iter_jsonl(path, problems):
        task = _parse_task(row, f"{path}:{number}", path.parent)
        if task.task_id in seen:
            raise SuiteError(f"{path}:{number}: duplicate task_id {task.task_id!r}")
        seen.add(task.task_id)
        tasks.append(task)
    lines = data.split(b"\n")
    for problem in problems:
        if lines[problem.line_number - 1].lstrip().startswith(b"#"):
            problem.message = "a comment: JSONL has no comment lines"
    loaded = Suite(name, path, hashlib.sha256(data).hexdigest(), tasks, problems)
    if not tasks:
        unreadable = "".join(f"\n  {line}" for line in loaded.problem_lines())
        raise SuiteError(
            f"suite {path} has no tasks" + (f"; unreadable:{unreadable}" if unreadable else "")
        )
    return loaded


def normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def _strip_code_fence(text: str) -> str:
    match = re.fullmatch(r"\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```\s*", text, flags=re.DOTALL)
    return match.group(1) if match else text


def judge(expected: dict[str, Any], answer: str) -> bool:
    """Judge a final answer against a task's ``expected``.

    Normalisation for ``equals``, ``contains`` and ``one_of``: both sides are stripped, runs of
    whitespace collapsed to one space and case-folded, so ``"  Paris\\n"`` equals ``"paris"``.
    ``regex`` must match the whole stripped answer (``re.fullmatch``, case-sensitive: it is
    how strict output formats are checked). ``json_equals`` parses the stripped answer (a
    Markdown code fence around it is allowed) and compares the parsed values with ``==``.
    """
    kind, want = next(iter(expected.items()))
    if kind == "equals":
        return normalise(answer) == normalise(str(want))
    if kind == "contains":
        return normalise(str(want)) in normalise(answer)
    if kind == "one_of":
        return normalise(answer) in {normalise(str(w)) for w in want}
    if kind == "regex":
        return re.fullmatch(str(want), answer.strip()) is not None
    if kind == "json_equals":
        try:
            return bool(json.loads(_strip_code_fence(answer).strip()) == want)
        except (json.JSONDecodeError, ValueError):
            return False
    raise SuiteError(f"unknown expectation {kind!r}")
