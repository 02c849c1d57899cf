"""The workbench in a real terminal (a private tmux server at 80×24), started as a user starts
it: what it leaves on the terminal when it exits, and what it does when its output is not a
terminal at all."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Terminal:
    """A private tmux server running one command in a throwaway home, at a fixed size."""

    def __init__(self, command: str, cwd: Path, size: tuple[int, int] = (80, 24)) -> None:
        self.socket = f"dd-tui-{os.getpid()}-{time.monotonic_ns()}"
        env = [f"{k}={v}" for k, v in os.environ.items() if k.startswith(("XDG_", "DRIFTDESK"))]
        self._tmux(
            "new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd),
            "env", f"HOME={os.environ['HOME']}", f"PATH={os.environ.get('PATH', '')}",
            "PYTHON_KEYRING_BACKEND=keyring.backends.fail.Keyring", *env,
            "TERM=xterm-256color", "sh", "-c", f"{command}; echo EXITED $?; sleep 600",
        )  # fmt: skip

    def _tmux(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p")

    def wait_for(self, pattern: str, timeout: float) -> str:
        started = time.monotonic()
        screen = ""
        while time.monotonic() - started < timeout:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} not on the screen within {timeout:g} s:\n{screen}")

    def keys(self, *keys: str) -> None:
        for key in keys:  # one at a time: "Escape" then "2" sent together reads as alt+2
            self._tmux("send-keys", key)
            time.sleep(0.15)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def slow_sandbox(home) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A simulated endpoint slow enough to watch (a keyless profile ``sim`` points at it)."""
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    # 300 ms a call: the 170 attempts take 25 s or more at the default concurrency (2), time
    # enough to leave the workbench while the run goes on.
    with SandboxServer(latency_ms=300.0) as server:
        ProfileStore().save(Profile("sim", "openai", server.base_url, SIM_MODEL, no_key=True))
        yield server.base_url


def _driftdesk() -> str:
    return f"{sys.executable} -m driftdesk"


def test_keep_running_shows_live_progress_in_the_terminal(home, slow_sandbox) -> None:  # type: ignore[no-untyped-def]
    """Seen: 'Keep running' left the terminal blank for the rest of the run; 'still running'
    and 'completed' came only at its end (the app's exit waited for the run's thread)."""
    terminal = Terminal(_driftdesk(), home.project)
    try:
        terminal.wait_for(r"Volatility", 30)
        terminal.keys("2")
        terminal.wait_for(r"New run", 15)
        terminal.keys("n")
        terminal.wait_for(r"sim · simulated-model-1", 20)  # the profile, preselected
        terminal.keys("C-s")
        terminal.wait_for(r"\[running\]", 30)
        terminal.keys("q")
        terminal.wait_for(r"Keep running", 10)
        terminal.keys("Down", "Enter")
        screen = terminal.wait_for(r"still running in [\s\S]*Ctrl-C", 10)
        assert "EXITED" not in screen
        progress = terminal.wait_for(r"\d+/170\s+\d+%\s+pass \d+", 10)
        assert "completed" not in progress  # live, while the run goes on
        final = terminal.wait_for(r"EXITED 0", 120)
        assert re.search(r"completed: .*runs", final.replace("\n", "")), final
    finally:
        terminal.close()
