"""Imported error texts are masked: a foreign results file may quote a key (an echoed 401)."""

from __future__ import annotations

import json
from pathlib import Path

from driftdesk.analysis.imports import import_results

OPENAI_KEY = "sk-proj-LEAKED0123456789abcdefXYZ"
BEARER_TOKEN = "tok_LEAKEDbearer0123456789"


def _run_text(run_dir: Path) -> str:
    return "".join(p.read_text() for p in run_dir.rglob("*") if p.is_file())


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]


def test_tau_bench_error_text_is_masked_before_it_is_cut(tmp_path: Path) -> None:
    # The second key starts just before the 300-character cut: masked first, nothing of it left.
    long_error = (
        "openai.AuthenticationError: Error code: 401 - Incorrect API key provided: " + OPENAI_KEY
    )
    cut_error = "x" * 290 + " " + OPENAI_KEY
    records = [
        {"task_id": 0, "trial": 0, "reward": 1.0, "info": {}},
        {"task_id": 1, "trial": 0, "reward": 0.0, "info": {"error": long_error}},
        {"task_id": 2, "trial": 0, "reward": 0.0, "info": {"error": cut_error}},
    ]
    source = tmp_path / "results.json"
    source.write_text(json.dumps(records))
    result = import_results(source, fmt="tau-bench", out=tmp_path / "runs")
    rows = _rows(result.run_dir)
    assert [r["outcome"] for r in rows] == ["pass", "link_error", "harness_error"]
    assert rows[1]["error_code"] == "401"
    assert rows[1]["error_message"].startswith("openai.AuthenticationError: Error code: 401")
    assert "Incorrect API key provided: sk-p" in rows[1]["error_message"]
    text = _run_text(result.run_dir)
    assert OPENAI_KEY not in text and OPENAI_KEY[:9] not in text


def test_generic_jsonl_error_messages_are_masked(tmp_path: Path) -> None:
    lines = [
        {"task_id": "a", "success": True},
        {
            "task_id": "b",
            "error_code": "401",
            "error_message": f"request had Authorization: Bearer {BEARER_TOKEN}",
        },
    ]
    source = tmp_path / "results.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = import_results(source, fmt="jsonl", out=tmp_path / "runs", copy=True)
    rows = _rows(result.run_dir)
    assert [r["outcome"] for r in rows] == ["pass", "link_error"]
    assert rows[1]["error_message"].startswith("request had Authorization: Bearer ")
    assert BEARER_TOKEN not in _run_text(result.run_dir)


def test_the_sql_redaction_of_a_jsonl_copy_is_the_python_one() -> None:
    # The JSONL import redacts in DuckDB (no Python function in SQL: that needs numpy); it must
    # scrub exactly what ``redact`` scrubs, and keep what it keeps.
    import duckdb

    from driftdesk.analysis.jsonl_import import _redacted_sql
    from driftdesk.secrets import redact

    texts = [
        f"401: Incorrect API key provided: {OPENAI_KEY}.",
        f"Authorization: Bearer {BEARER_TOKEN} rejected",
        f"AUTHORIZATION: bearer\t{BEARER_TOKEN}",
        'headers {"x-api-key": "abcdefgh12345678"} and X-API-KEY=zzzzzzzz99',
        "sk-short and sk-abcd1234 and ask-abcdefghijklmnop",  # too short / not at a boundary
        "ésk-abcdefghijklmnopq and _sk-abcdefghijklmnopq",  # ASCII word boundaries, both sides
        "two keys sk-aaaabbbbccccdddd sk-eeeeffffgggghhhh, a quote ' and a backslash \\1",
        "nothing secret here",
        "",
    ]
    con = duckdb.connect()
    for text in texts:
        (sql,) = con.execute(f"SELECT {_redacted_sql('$1')}", [text]).fetchone()  # type: ignore[misc]
        assert sql == redact(text), text
    assert redact(texts[0]) != texts[0]  # the patterns do scrub something


def test_a_jsonl_copy_masks_keys_in_error_messages(tmp_path: Path) -> None:
    rows = [
        {"task_id": "t1", "success": True},
        {"task_id": "t2", "error_code": "401", "error_message": f"bad key: {OPENAI_KEY}"},
    ]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_results(source, fmt="jsonl", out=tmp_path / "runs", copy=True)
    assert OPENAI_KEY not in _run_text(result.run_dir)
    messages = [r["error_message"] for r in _rows(result.run_dir) if r["error_message"]]
    assert messages and "sk-proj…redacted" in messages[0]
