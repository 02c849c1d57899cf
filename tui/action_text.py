"""How an agent's actions read on screen: a shell tool's call as the command line the client
ran (its arguments decoded once from their JSON), any other call as its arguments, an answer
as its text. The text returned is raw: a screen escapes it once (``terminal.printable``) and
puts it in a ``rich.text.Text``, which is never read as markup."""

from __future__ import annotations

import json
import shlex
from typing import Any

# Where each client's shell tool keeps its command: Claude Code's Bash {"command": str},
# Codex's exec_command {"cmd": str} or shell {"command": ["bash", "-lc", str]}.
COMMAND_KEYS = ("command", "cmd")
SHELL_FLAGS = ("-c", "-lc", "-ilc")


def command_of(arguments: str) -> str | None:
    """The command line of a shell tool call's arguments (JSON), or None if it is not one."""
    try:
        decoded = json.loads(arguments)
    except ValueError:
        return None
    if not isinstance(decoded, dict):
        return None
    for key in COMMAND_KEYS:
        value = decoded.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and value[-2] in SHELL_FLAGS:  # bash -lc SCRIPT: the script
                return str(value[-1])
            return shlex.join(value)
    return None


def call_text(name: str, arguments: str) -> str:
    """``$ <command>`` for a shell call; else ``name(key=value, …)``, strings shown as they are."""
    command = command_of(arguments)
    if command is not None:
        return f"$ {command}"
    try:
        decoded: Any = json.loads(arguments)
    except ValueError:
        return f"{name}({arguments})"
    if not isinstance(decoded, dict):
        return f"{name}({json.dumps(decoded, ensure_ascii=False)})"
    parts = [
        f"{key}={value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for key, value in decoded.items()
    ]
    return f"{name}({', '.join(parts)})"


def action_text(action: Any, said: str | None = None) -> str:
    """One ``analysis.trajectory.Action`` as it reads: ``said`` is the model turn's own text
    for an answer (the action keeps it with its whitespace folded)."""
    if action.kind == "call":
        return call_text(action.name, action.value)
    text = said if said is not None and said.strip() else action.value
    return f"{action.kind}: {text.strip()}"


def diff_summary(lines: list[str]) -> list[str]:
    """``<file> +added -removed`` for each file of a git-style diff, in its order."""
    files: dict[str, list[int]] = {}
    current: str | None = None
    for line in lines:
        if line.startswith("diff --git "):
            current = line.split(" b/", 1)[-1] if " b/" in line else line[len("diff --git ") :]
            files.setdefault(current, [0, 0])
        elif line.startswith("+++ ") or line.startswith("--- "):
            name = line[4:]
            if current is None and name not in ("/dev/null",):
                current = name[2:] if name.startswith(("a/", "b/")) else name
                files.setdefault(current, [0, 0])
        elif current is not None and line.startswith("+"):
            files[current][0] += 1
        elif current is not None and line.startswith("-"):
            files[current][1] += 1
    return [f"{name} +{added} -{removed}" for name, (added, removed) in files.items()]
