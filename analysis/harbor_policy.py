"""Who ended a Harbor trial, and what driftdesk makes of it.

Harbor 0.25 classifies a trial's failure by the name of its first recorded exception
(``harbor/models/trial/error_policy.py``): a table of names to a failure cause. This module
keeps that table (the names, read from harbor 0.25.0's wheel; harbor is never imported) and
maps each cause to driftdesk's outcomes:

========================  ===========================================================
Harbor cause              driftdesk
========================  ===========================================================
(no exception)            judged by the reward (``pass``/``fail``); no reward: harness
agent_exhausted_budget    judged by the reward (a timed-out trial can score 1.0)
agent_refused_task        judged by the reward
sandbox_failed            ``link_error``, the code names the class
model_provider_failed     ``link_error``
harbor_failed             ``link_error``
unclassified (unknown)    ``link_error`` (``NonZeroAgentExitCodeError`` is here too)
verifier_failed           ``harness_error``
cancelled                 left out of the run and counted
========================  ===========================================================

Where a name means different things, the message is read: litellm's ``BadRequestError`` is a
model provider's (a billing or quota refusal among them), but sandbox clients (Daytona,
Runloop, Modal, E2B) raise classes of that name too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Cause = Literal[
    "sandbox_failed",
    "model_provider_failed",
    "harbor_failed",
    "unclassified",
    "agent_exhausted_budget",
    "agent_refused_task",
    "verifier_failed",
    "cancelled",
]

_CAUSE_NAMES: dict[Cause, tuple[str, ...]] = {
    "sandbox_failed": (
        "EnvironmentStartTimeoutError",
        "SandboxBuildFailedError",
        "AgentSetupTimeoutError",
        "HealthcheckError",
        "SandboxLikelyOutOfMemoryError",
        "MemoryLimitExceededError",
        "SSHAccessError",
        "GKEExecStreamClosedError",
        "GKEPodNotFoundError",
        "RuntimeRequestError",
        "AddTestsDirError",
        "DownloadVerifierDirError",
    ),
    "model_provider_failed": (
        "ApiError",
        "ApiRateLimitError",
        "ApiInternalServerError",
        "ApiOverloadedError",
        "ApiConnectionClosedError",
        "ApiResponseStalledError",
        "UnknownApiError",
        "NetworkConnectionError",
        "ApiConnectionError",
        "ApiUsageLimitError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "APIConnectionError",
        "APIError",
        "Timeout",
        "BadRequestError",
        "UnprocessableEntityError",
        "UnsupportedParamsError",
        "APIResponseValidationError",
        "BudgetExceededError",
        "AgentAuthenticationError",
        "ModelNotFoundError",
        "ApiProviderResourceNotFoundError",
        "AuthenticationError",
        "PermissionDeniedError",
        "NotFoundError",
    ),
    "harbor_failed": (
        "ServiceOperationsUnsupportedError",
        "VercelScopeError",
        "DspyImportError",
        "MissingExtraError",
        "RegradeError",
    ),
    "unclassified": ("NonZeroAgentExitCodeError",),
    "agent_exhausted_budget": (
        "AgentTimeoutError",
        "ContextWindowExceededError",
        "OutputTokenExceededError",
        "ContextLengthExceededError",
        "OutputLengthExceededError",
    ),
    "agent_refused_task": ("AgentSafetyRefusalError", "ContentPolicyViolationError"),
    "verifier_failed": (
        "VerifierTimeoutError",
        "RewardFileNotFoundError",
        "RewardFileEmptyError",
        "VerifierOutputParseError",
    ),
    "cancelled": ("CancelledError",),
}
POLICY: dict[str, Cause] = {name: cause for cause, names in _CAUSE_NAMES.items() for name in names}
# The causes whose trials Harbor counts as a valid measurement of the agent (reward_valid).
REWARD_VALID: frozenset[Cause] = frozenset({"agent_exhausted_budget", "agent_refused_task"})
# Names several libraries raise for different things: the message says which.
AMBIGUOUS = frozenset({"BadRequestError", "NotFoundError", "PermissionDeniedError", "Timeout"})
_SANDBOX_WORDS = re.compile(
    r"\b(daytona|runloop|modal|e2b|sandbox|docker|container|devbox|kubernetes|gke|pod)\b",
    re.IGNORECASE,
)
_BILLING_WORDS = re.compile(
    r"credit balance|billing|insufficient[_ ](funds|quota|credits?)|quota|payment|spend limit",
    re.IGNORECASE,
)

Outcome = Literal["judged", "link_error", "harness_error", "cancelled"]


@dataclass(frozen=True)
class Attribution:
    cause: Cause | None  # None: the trial recorded no exception
    outcome: Outcome  # "judged": pass or fail by the reward
    detail: str | None = None  # what the message said where the name was ambiguous

    @property
    def reason(self) -> str:
        """The cause as a report shows it (``sandbox_failed``, ``model_provider_failed
        (billing)``)."""
        if self.cause is None:
            return "no exception"
        return self.cause + (f" ({self.detail})" if self.detail else "")


_OUTCOME_OF: dict[Cause, Outcome] = {
    "sandbox_failed": "link_error",
    "model_provider_failed": "link_error",
    "harbor_failed": "link_error",
    "unclassified": "link_error",
    "agent_exhausted_budget": "judged",
    "agent_refused_task": "judged",
    "verifier_failed": "harness_error",
    "cancelled": "cancelled",
}


def attribute(exception_type: str | None, message: str = "") -> Attribution:
    """What a trial whose first recorded exception is ``exception_type`` (None: none) counts
    as. An unknown name is ``unclassified``, as Harbor's ``policy_for`` reads it."""
    if not exception_type:
        return Attribution(None, "judged")
    cause: Cause = POLICY.get(exception_type, "unclassified")
    detail = None
    if exception_type in AMBIGUOUS:
        if _SANDBOX_WORDS.search(message or ""):
            cause, detail = "sandbox_failed", f"{exception_type} from the sandbox"
        elif _BILLING_WORDS.search(message or ""):
            detail = "billing"
    return Attribution(cause, _OUTCOME_OF[cause], detail)
