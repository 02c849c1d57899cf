"""Process facts the tests share."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """The process still runs: it exists and is not a zombie (exited, not yet reaped). A signal
    is delivered before ``kill()`` returns, but the process exits some time after."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            # the name in parentheses may hold spaces: the state follows the last ')'
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
