"""ATIF (the Agent Trajectory Interchange Format, Harbor's ``models/trajectories``) in and out:
the one owner of that format.

In: an ATIF file becomes driftdesk's step model (``analysis.steps``). A ``user`` or ``system``
step is a ``user`` step; an ``agent`` step is a ``model`` step (its message, its tool calls as
(name, canonical JSON arguments), its metrics' tokens and model), followed by one
``tool_result`` step per observation result. A subagent referenced by an observation
(``subagent_trajectory_ref``, embedded in ``subagent_trajectories`` or in a file beside) has its
steps placed right after that result, each marked with ``detail["subagent"]``. A
``continued_trajectory_ref`` names the file the trajectory goes on in (Terminus' summaries):
its steps follow, less those marked ``is_copied_context``. Versions 1.0 to 1.8 are read; any
other is refused with one line, as is a file past the size cap. Every string passes the
redaction everything driftdesk shows passes (``steps.redacted``).

Out: ``to_atif`` writes an attempt's trajectory (its final try's steps) as ATIF-v1.8, the
earlier tries in the root ``extra.driftdesk.earlier_tries``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from driftdesk.analysis.steps import Step, Trajectory, canonical_arguments, numbered, redacted

VERSIONS = tuple(f"ATIF-v1.{n}" for n in range(9))
WRITTEN_VERSION = "ATIF-v1.8"
MAX_TRAJECTORY_BYTES = 128 << 20  # a trajectory file past this is not read (named instead)
MAX_CONTINUATIONS = 64


class AtifError(ValueError):
    """The file is not an ATIF trajectory driftdesk can read (one line, naming it)."""


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(message: Any) -> str:
    """A message or observation content: a string, or ContentPart texts (media as a mark)."""
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        parts = []
        for part in message:
            if isinstance(part, dict):
                if part.get("type") == "text":
                    parts.append(str(part.get("text") or ""))
                else:
                    source = _obj(part.get("source"))
                    parts.append(f"[{part.get('type')}: {source.get('path', '')}]")
        return "\n".join(parts)
    return ""


def load(path: Path) -> dict[str, Any]:
    """The ATIF document at ``path``, checked for its size and version."""
    size = path.stat().st_size
    if size > MAX_TRAJECTORY_BYTES:
        raise AtifError(
            f"{path.name}: {size / (1 << 20):.0f} MiB is over the {MAX_TRAJECTORY_BYTES >> 20} "
            "MiB a trajectory is read to; not read"
        )
    try:
        doc = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AtifError(f"{path.name}: not valid JSON ({exc})") from None
    check_version(doc, path.name)
    return doc


def check_version(doc: Any, name: str) -> None:
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise AtifError(f"{name}: not an ATIF trajectory (no steps)")
    version = doc.get("schema_version", WRITTEN_VERSION)
    if version not in VERSIONS:
        raise AtifError(
            f"{name}: ATIF version {version!r} is not one driftdesk reads "
            f"({VERSIONS[0]} to {VERSIONS[-1]})"
        )


def steps_of(
    doc: dict[str, Any], base: Path | None = None, problems: list[str] | None = None
) -> list[Step]:
    """``doc``'s steps in the step model, its subagents' and continuations' in place (files
    they name are looked for in ``base``); what cannot be read goes to ``problems``."""
    problems = problems if problems is not None else []
    steps = list(_steps(doc, base, problems, subagent=None, depth=0))
    seen = 0
    current = doc
    while isinstance(current.get("continued_trajectory_ref"), str) and base is not None:
        seen += 1
        name = current["continued_trajectory_ref"]
        target = base / Path(name).name
        if seen > MAX_CONTINUATIONS or not target.is_file():
            problems.append(f"continued trajectory {name}: not found beside the trajectory")
            break
        try:
            current = load(target)
        except (AtifError, OSError) as exc:
            problems.append(str(exc))
            break
        steps.extend(_steps(current, base, problems, subagent=None, depth=0, skip_copied=True))
    return numbered(steps)


def _steps(
    doc: dict[str, Any],
    base: Path | None,
    problems: list[str],
    *,
    subagent: str | None,
    depth: int,
    skip_copied: bool = False,
) -> list[Step]:
    embedded = {
        s.get("trajectory_id"): s
        for s in doc.get("subagent_trajectories") or []
        if isinstance(s, dict)
    }
    out: list[Step] = []
    for raw in doc.get("steps") or []:
        if not isinstance(raw, dict) or (skip_copied and raw.get("is_copied_context")):
            continue
        detail: dict[str, Any] = {"step_id": raw.get("step_id")}
        if subagent is not None:
            detail["subagent"] = subagent
        if raw.get("timestamp"):
            detail["timestamp"] = raw["timestamp"]
        text = _text(raw.get("message"))
        if raw.get("source") != "agent":
            detail["source"] = raw.get("source")
            out.append(Step("user", 0, text=redacted(text), detail=detail))
            continue
        metrics = _obj(raw.get("metrics"))
        counts = [metrics.get(k) for k in ("prompt_tokens", "completion_tokens")]
        tokens = (
            sum(c for c in counts if isinstance(c, int))
            if any(isinstance(c, int) for c in counts)
            else None
        )
        for name in ("reasoning_content", "reasoning_effort"):
            if raw.get(name) is not None:
                detail["reasoning" if name == "reasoning_content" else name] = redacted(raw[name])
        for name in ("cost_usd", "cached_tokens", "prompt_tokens", "completion_tokens"):
            if metrics.get(name) is not None:
                detail[name] = metrics[name]
        calls = [c for c in raw.get("tool_calls") or [] if isinstance(c, dict)]
        out.append(
            Step(
                "model",
                0,
                text=redacted(text),
                tool_calls=[
                    (
                        str(c.get("function_name")),
                        redacted(
                            canonical_arguments(
                                json.dumps(c.get("arguments") or {}, ensure_ascii=False)
                            )
                        ),
                    )
                    for c in calls
                ],
                tokens=tokens,
                served_model=raw.get("model_name") or None,
                detail=detail,
            )
        )
        observation = _obj(raw.get("observation"))
        for result in observation.get("results") or []:
            if not isinstance(result, dict):
                continue
            result_detail: dict[str, Any] = {"tool_call_id": result.get("source_call_id")}
            if subagent is not None:
                result_detail["subagent"] = subagent
            out.append(
                Step(
                    "tool_result",
                    0,
                    text=redacted(_text(result.get("content"))),
                    detail=result_detail,
                )
            )
            for ref in result.get("subagent_trajectory_ref") or []:
                out.extend(_subagent(ref, embedded, base, problems, depth))
    return out


def _subagent(
    ref: Any, embedded: dict[Any, Any], base: Path | None, problems: list[str], depth: int
) -> list[Step]:
    if not isinstance(ref, dict) or depth >= 4:
        return []
    sub = embedded.get(ref.get("trajectory_id")) if ref.get("trajectory_id") else None
    if sub is None and isinstance(ref.get("trajectory_path"), str) and base is not None:
        target = base / Path(ref["trajectory_path"]).name
        try:
            sub = load(target)
        except (AtifError, OSError) as exc:
            problems.append(f"subagent {ref['trajectory_path']}: {exc}")
            return []
    if not isinstance(sub, dict):
        problems.append(
            f"subagent {ref.get('trajectory_id') or ref.get('trajectory_path')}: not found"
        )
        return []
    name = str(ref.get("trajectory_id") or ref.get("trajectory_path"))
    return _steps(sub, base, problems, subagent=name, depth=depth + 1)


def read_trajectory_file(path: Path, problems: list[str]) -> list[Step] | None:
    """The steps of the ATIF file at ``path`` (None, with a problem line, when unreadable)."""
    try:
        doc = load(path)
    except FileNotFoundError:
        return None
    except (AtifError, OSError) as exc:
        problems.append(str(exc))
        return None
    return steps_of(doc, path.parent, problems)


# --- out ----------------------------------------------------------------------------------


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def _atif_steps(steps: list[Step], model: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    open_calls: list[str] = []  # the last agent step's call ids not answered yet
    for step in steps:
        if step.kind == "tool_result" and out and out[-1]["source"] == "agent":
            results = out[-1].setdefault("observation", {"results": []})["results"]
            result: dict[str, Any] = {"content": step.text}
            if open_calls:
                result["source_call_id"] = open_calls.pop(0)
            results.append(result)
            continue
        open_calls = []
        if step.kind == "model":
            atif: dict[str, Any] = {"source": "agent", "message": step.text}
            if step.served_model and step.served_model != model:
                atif["model_name"] = step.served_model
            if step.tool_calls:
                ids = [f"call_{len(out) + 1}_{i}" for i in range(len(step.tool_calls))]
                atif["tool_calls"] = [
                    {
                        "tool_call_id": call_id,
                        "function_name": name,
                        "arguments": _arguments(arguments),
                    }
                    for call_id, (name, arguments) in zip(ids, step.tool_calls, strict=True)
                ]
                open_calls = list(ids)
            if step.tokens is not None:
                atif["metrics"] = {"extra": {"driftdesk_tokens": step.tokens}}
            reasoning = step.detail.get("reasoning")
            if isinstance(reasoning, str):
                atif["reasoning_content"] = reasoning
        elif step.kind == "user":
            atif = {"source": "user", "message": step.text}
        else:  # a tool result with no turn before it, or a link event: said by the system
            atif = {"source": "system", "message": step.text or step.summary()}
        extra: dict[str, Any] = {"driftdesk_kind": step.kind}
        if step.call_index is not None:
            extra["call_index"] = step.call_index
        if step.latency_ms is not None:
            extra["latency_ms"] = step.latency_ms
        atif["extra"] = extra
        out.append(atif)
    if not out:  # ATIF needs a step: say that none was recorded
        out.append({"source": "system", "message": "(no steps were recorded for this attempt)"})
    for number, atif in enumerate(out, start=1):
        atif["step_id"] = number
    return [dict(sorted(s.items(), key=lambda kv: kv[0] != "step_id")) for s in out]


def to_atif(
    traj: Trajectory,
    *,
    agent: str,
    agent_version: str,
    model: str | None,
    session_id: str,
) -> dict[str, Any]:
    """``traj`` (its final try's steps) as an ATIF-v1.8 document; its earlier tries, the
    outcome and the attempt's figures in the root ``extra``."""
    tokens = [s.tokens for s in traj.model_turns if s.tokens is not None]
    doc: dict[str, Any] = {
        "schema_version": WRITTEN_VERSION,
        "session_id": session_id,
        "agent": {
            "name": agent,
            "version": agent_version,
            **({"model_name": model} if model else {}),
        },
        "steps": _atif_steps(traj.steps, model),
        "extra": {
            "driftdesk": {
                "task_id": traj.task_id,
                "attempt": traj.attempt,
                "outcome": traj.outcome,
                "source": traj.source,
                "try": traj.try_number,
                "tokens": traj.tokens,
                "latency_ms": traj.latency_ms,
                "earlier_tries": [t.to_json(full=True) for t in traj.earlier_tries],
            }
        },
    }
    steps = doc["steps"]
    doc["final_metrics"] = {"total_steps": len(steps)}
    if tokens:
        doc["final_metrics"]["extra"] = {"driftdesk_step_tokens": sum(tokens)}
    return redacted(doc)
