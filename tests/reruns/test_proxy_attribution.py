"""Attribution through the proxy with a real harness subprocess: an answer that came through a
cut stream is a link error, whatever the harness concluded; the attempt row carries the
served-model mismatches and the model's own latency."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from reruns_helpers import ScriptedEndpoint, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.rundir import layout

REAL_KEY = "sk-test-REALKEY-attribution-0123456789"

# A careless harness: reads whatever the stream gave until it ends, never checks that the
# answer was complete, and writes its verdict. A truncated stream is a broken read for it now;
# it swallows that too, and judges what it got.
CARELESS = textwrap.dedent(
    """
    import json, os, sys, urllib.request
    result_path = sys.argv[1]
    body = json.dumps({"model": os.environ["DRIFTDESK_MODEL"], "stream": True,
                       "messages": [{"role": "user", "content": os.environ["DRIFTDESK_PROMPT"]}]})
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    raw = b""
    response = urllib.request.urlopen(request, timeout=10)
    try:
        while chunk := response.read1(65536):
            raw += chunk
    except Exception as exc:
        print(f"read failed: {type(exc).__name__}", file=sys.stderr)
    text = ""
    for line in raw.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
    with open(result_path, "w") as fh:
        json.dump({"success": text.strip() == "42"}, fh)
    """
)


async def test_a_verdict_on_a_cut_stream_is_a_link_error(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    script = tmp_path / "careless.py"
    script.write_text(CARELESS)
    suite = write_suite(tmp_path / "suite.jsonl", ["truncated", "answer-42"])
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="local", protocol="openai", base_url=scripted.url, model="m"),
            suite=str(suite),
            repeat=1,
            agent="command",
            command=f"{sys.executable} {script} {{result_path}}",
            out_dir=tmp_path / "runs",
            api_key=REAL_KEY,
            retry_policy=RetryPolicy(max_retries=0),
        )
    )
    rows = {r["task_id"]: r for r in read_rows(outcome.run_dir / "attempts.jsonl")}
    cut = rows["truncated"]
    # The harness wrote {"success": true}: the partial stream held "42" already.
    result_file = layout.result_file(outcome.run_dir, cut)
    assert result_file is not None
    result = result_file.read_text()
    assert '"success": true' in result
    assert (cut["outcome"], cut["error_code"]) == ("link_error", "truncated")
    assert "broken link" in cut["error_message"]
    ok = rows["answer-42"]
    assert ok["outcome"] == "pass"
    # The endpoint answers as "test-model": not the "m" this profile asked for.
    assert ok["model_mismatches"] == 1 and outcome.stats.model_mismatches == 2
    (call,) = [c for c in read_rows(outcome.run_dir / "calls.jsonl") if c["task_id"] == "answer-42"]
    assert ok["model_latency_ms"] == call["latency_ms"] > 0
    assert ok["latency_ms"] > ok["model_latency_ms"]  # the harness's start-up is not the model's
