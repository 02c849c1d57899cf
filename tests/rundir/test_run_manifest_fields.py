"""RunManifest's typed fields read a manifest exactly as the readers they replace did (issue
47): a field that is not a non-empty string reads None, a repeat that is not an int (or is a
bool) reads None, a suite that is not an object reads empty."""

from __future__ import annotations

from typing import Any

import pytest

from driftdesk.rundir import RunManifest

ODD_MANIFESTS: list[dict[str, Any]] = [
    {},
    {"model": "", "profile": 5, "status": None, "started_at": False, "agent": ""},
    {"model": "m", "profile": "p", "status": "completed", "started_at": "2026", "agent": "codex"},
    {"repeat": True, "suite": "basic"},
    {"repeat": "3", "suite": {"name": 7, "path": "", "sha256": "00"}},
    {"repeat": 3, "suite": {"name": "basic", "path": "/s.jsonl"}},
    {"repeat": 2.0, "suite": None},
    {"tasks": 5, "resumes": 5, "client": "codex", "check_rule": ""},
    {"tasks": "ab", "resumes": [{"check_rule": "exit-v2"}, "x"], "check_rule": "exit-v1"},
]


def _old_text(value: Any) -> str | None:
    # how trend_data and agent_identity read a text field before RunManifest
    return value if isinstance(value, str) and value else None


@pytest.mark.parametrize("data", ODD_MANIFESTS)
def test_text_fields_read_as_the_trend_and_agent_identity_read_them(data: dict[str, Any]) -> None:
    manifest = RunManifest.from_json(data)
    for name in ("model", "profile", "status", "started_at", "agent", "run_id", "base_url"):
        assert getattr(manifest, name) == _old_text(data.get(name)), name
    found = data.get("suite")
    suite = found if isinstance(found, dict) else {}
    assert manifest.suite_name == _old_text(suite.get("name"))
    assert manifest.suite_path == _old_text(suite.get("path"))
    assert manifest.suite_sha256 == _old_text(suite.get("sha256"))
    assert manifest.check_rule == _old_text(data.get("check_rule"))
    client = data.get("client")
    assert manifest.client == (client if isinstance(client, dict) else None)
    # a field the reader does not ask about never makes the others unreadable
    tasks, resumes = data.get("tasks"), data.get("resumes")
    assert manifest.tasks == ([str(t) for t in tasks] if isinstance(tasks, list) else [])
    listed = resumes if isinstance(resumes, list) else []
    assert manifest.resumes == [r for r in listed if isinstance(r, dict)]
    repeat = data.get("repeat")
    assert manifest.repeat == (
        repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else None
    )


def test_to_json_gives_back_every_key_in_its_order() -> None:
    data = {"z": 1, "run_id": "r", "a": [1], "status": ""}
    assert list(RunManifest.from_json(data).to_json().items()) == list(data.items())
