"""An inspect_ai task file for the tests that run the real inspect (its harness tests and the
CLI's): ``write_task`` writes one whose samples behave as named (each sample's input says
``behave:NAME``, which the test's endpoint answers accordingly)."""

from __future__ import annotations

import textwrap
from pathlib import Path

TASK_FILE = textwrap.dedent(
    """
    import json, os
    from inspect_ai import Task, task
    from inspect_ai.dataset import Sample

    # What inspect's process was given, for the test to inspect.
    with open(os.path.join(os.path.dirname(__file__), "env-seen.json"), "w") as fh:
        json.dump(dict(os.environ), fh)
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    BEHAVIOURS = {behaviours!r}

    @task
    def arithmetic():
        return Task(
            dataset=[
                Sample(id=name, input=f"behave:{{name}} What is six times seven?", target="42")
                for name in BEHAVIOURS
            ],
            solver=generate(),
            scorer=match(),{options}
        )
    """
)


def write_task(folder: Path, behaviours: list[str], options: str = "") -> Path:
    path = folder / "arithmetic_task.py"
    path.write_text(TASK_FILE.format(behaviours=behaviours, options=options))
    return path
