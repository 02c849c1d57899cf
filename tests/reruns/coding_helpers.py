"""Suites of tasks that change files (workspace + check + simulated script), written into a
test's temporary folder, and a trap endpoint that counts requests that should never come."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

# Three coding tasks the sandbox's simulated model can do through any client's shell tool:
# always right, always wrong, and a coin flip whose wrong path leaves a different file.
CODING_TASKS: list[dict[str, Any]] = [
    {
        "task_id": "fix-add",
        "prompt": "In calc.py, add() subtracts. Make it add.",
        "workspace": "fix-add",
        "check": "python3 -c 'import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)'",
        "simulated": {
            "commands": [
                "sed -i 's/a - b/a + b/' calc.py",
                "env > client-env.txt",
                "python3 -c 'import calc; print(calc.add(2, 3))'",
            ],
            "answer": "add() now adds.",
            "skill": 1.0,
        },
    },
    {
        "task_id": "write-notes",
        "prompt": "Write the single word done into notes.txt.",
        "workspace": "write-notes",
        "setup": "echo started > setup-ran.txt",
        "check": 'test -f setup-ran.txt && test "$(cat notes.txt 2>/dev/null)" = done',
        "simulated": {"commands": ["echo done > notes.txt"], "answer": "Noted.", "skill": 0.0},
    },
    {
        "task_id": "rename",
        "prompt": "Rename old.txt to new.txt.",
        "workspace": "rename",
        "check": "test -f new.txt && test ! -e old.txt",
        "simulated": {
            "commands": ["mv old.txt new.txt", "ls"],
            "wrong": ["cp old.txt copy.txt"],
            "answer": "Renamed.",
            "skill": 0.5,
        },
    },
]


# A task whose simulated client shows what it can see: PID 1 of its namespace, the user's own
# Claude Code settings, its environment.
PROBE_TASK = {
    "task_id": "probe",
    "prompt": "Look around.",
    "workspace": "write-notes",
    "check": "test -s pid1.txt",
    "simulated": {
        "commands": [
            "tr '\\0' ' ' < /proc/1/cmdline > pid1.txt",
            'if test -e "$HOME/.claude/settings.json"; then echo seen; else echo hidden; fi'
            " > user-settings.txt",
            "env > client-env.txt",
        ],
        "answer": "Looked.",
        "skill": 1.0,
    },
}


def write_coding_suite(folder: Path, tasks: list[dict[str, Any]] | None = None) -> Path:
    """The suite file and its workspaces under ``folder``; returns the suite's path."""
    (folder / "fix-add").mkdir(parents=True, exist_ok=True)
    (folder / "fix-add" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (folder / "write-notes").mkdir(exist_ok=True)
    (folder / "write-notes" / "README").write_text("notes go here\n")
    (folder / "rename").mkdir(exist_ok=True)
    (folder / "rename" / "old.txt").write_text("keep me\n")
    suite = folder / "coding.jsonl"
    suite.write_text("".join(json.dumps(t) + "\n" for t in tasks or CODING_TASKS))
    return suite


class TrapEndpoint:
    """Answers nothing useful and counts every request: where a user's own config points."""

    def __init__(self) -> None:
        self.requests = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _any(self, request: web.Request) -> web.Response:
        self.requests += 1
        return web.json_response({"error": {"message": "trap"}}, status=418)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._any)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
