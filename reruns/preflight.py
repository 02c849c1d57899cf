"""Before a run's first attempt: the doctor's base-URL check and its live probe, once.

A run against a closed port or a mangled URL would otherwise end "completed" with every attempt
a connection error. The checks are the doctor's own (``providers.doctor``): the same message,
the same advice. Only a transient answer (429, 5xx) lets the run start anyway: its retries are
made for that.
"""

from __future__ import annotations

from driftdesk.providers.doctor import Check, check_base_url, probe_check, probe_endpoint
from driftdesk.providers.profiles import Profile

PROBE_TIMEOUT_S = 10.0


class EndpointCheckFailed(ValueError):
    """The endpoint cannot serve this run (unreachable, refused, wrong URL); nothing was run."""

    def __init__(self, profile: str, checks: list[Check]) -> None:
        self.profile = profile
        self.checks = checks
        super().__init__(
            f"the endpoint of profile {profile!r} failed its check, so the run did not start: "
            + "; ".join(check.message for check in checks)
        )


def _transient(status: int | None) -> bool:
    return status is not None and (status == 429 or status >= 500)


async def check_endpoint(
    profile: Profile, key: str | None, timeout: float = PROBE_TIMEOUT_S
) -> list[str]:
    """Raise ``EndpointCheckFailed`` when the endpoint cannot serve a run; return notices for
    what is worth saying but does not stop it (a model not listed, a 429 or 5xx right now)."""
    url_errors = [check for check in check_base_url(profile) if check.level == "error"]
    if url_errors:
        raise EndpointCheckFailed(profile.name, url_errors)
    result = await probe_endpoint(profile, key, timeout)
    check = probe_check(profile, result)
    if check.level == "error" and not _transient(result.status):
        raise EndpointCheckFailed(profile.name, [check])
    if check.level == "ok":
        return []
    return [f"endpoint check: {check.message}"]
