"""The Volatility screen's runs list: one option a run of the runs catalog
(``driftdesk.rundir.catalog``), its id, its status in colour and what tells it apart."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from driftdesk.rundir.catalog import RunInfo


class RunsList(OptionList):
    """The runs, each option's id its run dir."""

    def show_runs(self, runs: list[RunInfo], shown: list[RunInfo], open_run: Path | None) -> None:
        """``runs`` instead of ``shown``; the options are made again only if what they say
        changed, and ``open_run`` (resolved) stays highlighted."""
        before = {r.path: (r.status, r.success) for r in shown}
        if [r.path for r in runs] == list(before) and all(
            before[r.path] == (r.status, r.success) for r in runs
        ):
            return
        self.clear_options()
        for index, run in enumerate(runs):
            label = Text()
            label.append(run.run_id + "\n")
            label.append(f"  {run.label}", style=_status_style(run.status))
            label.append(f" · {run.details} · {run.started_at[:16]}", style="dim")
            self.add_option(Option(label, id=str(run.path)))
            if open_run is not None and run.path.resolve() == open_run:
                self.highlighted = index


def _status_style(status: str) -> str:
    return {
        "running": "bold cyan",
        "completed": "green",
        "interrupted": "yellow",
        "failed": "red",
    }.get(status, "dim")
