"""The CLI's one error wrapper: a command's expected errors from the cores become one line on
stderr and an exit code, each command group declaring which errors it expects and how it says
them (``ErrorStyle``); anything else is a bug and keeps its traceback.

Exit codes (driftdesk --help): 2 for usage and bad input, 1 for a command that was understood
but failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from driftdesk.terminal import printable

Handler = Callable[[argparse.Namespace], int]
EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


@dataclass(frozen=True)
class ErrorStyle:
    """Which errors a command group expects and how it reports them."""

    # the error types, imported only when a command runs (``driftdesk key`` starts fast)
    expected: Callable[[], tuple[type[BaseException], ...]]
    prefix: str  # before the error's text on stderr
    exit_code: Callable[[BaseException], int]


def guarded(handler: Handler, style: ErrorStyle) -> Handler:
    """``handler`` with ``style``'s expected errors turned into one clear line on stderr and
    its exit code."""

    def run(args: argparse.Namespace) -> int:
        expected = style.expected()
        try:
            return handler(args)
        except BrokenPipeError:
            raise  # the reader left (`| head`): main ends quietly
        except expected as exc:
            print(printable(f"{style.prefix}{exc}"), file=sys.stderr)
            return style.exit_code(exc)

    run.__name__ = handler.__name__
    return run


def err(message: str) -> None:
    """One line on stderr, made printable (it may name a path, or quote a file)."""
    print(printable(message), file=sys.stderr)


def _provider_errors() -> tuple[type[BaseException], ...]:
    from driftdesk.providers.errors import EXPECTED

    return EXPECTED


def _provider_exit_code(exc: BaseException) -> int:
    from driftdesk.providers.errors import ProfileError

    # A profile named or given wrongly is bad input, as in `run`; the rest failed.
    return EXIT_BAD_INPUT if isinstance(exc, ProfileError) else EXIT_FAILED


def _analysis_input_errors() -> tuple[type[BaseException], ...]:
    from driftdesk.analysis.import_formats import ResultsImportError
    from driftdesk.analysis.prices import PriceTableError
    from driftdesk.analysis.sources import SourceError

    return (SourceError, PriceTableError, ResultsImportError)


# profile, key, switch, history, restore, status, exec, doctor, import of a tool's config
PROVIDER_ERRORS = ErrorStyle(_provider_errors, "driftdesk: error: ", _provider_exit_code)
# report, compare, check, tasks, plot, import of results: the cores' input errors
ANALYSIS_INPUT_ERRORS = ErrorStyle(_analysis_input_errors, "driftdesk: ", lambda _: EXIT_BAD_INPUT)
