"""``report/compare/trend --format html --out FILE``: what the file holds, read as a file.

The figures are the cores' own JSON (the same bytes' worth as ``--format json``); nothing
secret gets in (the profile's key from the keyring, in any encoding; anything key-shaped; a
base URL's credentials and query); recorded text cannot end the data block; content is left
out when asked or when the run kept no bodies; the CSP allows only the page's own script and
style, by hash.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from page_helpers import KEY, SHAPED_KEY, PageEnv, page_data, plant

pytestmark = pytest.mark.keyring

PROMPT = "Reply with the date only"  # in the basic suite's format tasks' prompts


def test_the_page_holds_the_report_json_as_report_writes_it(page_env: PageEnv) -> None:
    html, _ = page_env.page("report", str(page_env.run_a))
    data = page_data(html)
    want = page_env.json("report", str(page_env.run_a), "--format", "json")
    (run,) = data["runs"]
    assert run["report"] == want
    # a run made under faults: the page says so
    assert want["injection"]["faults"] > 0 and want["retries"] > 0
    assert f'data-figure="injection.faults" data-value="{want["injection"]["faults"]}"' in html
    identity = run["identity"]
    assert identity["profile"] == "sim" and identity["inject"] == "429=10%:0.01s,500=5%"
    assert identity["models_served"] and identity["driftdesk_version"]
    # every attempt of every task, the winning row of each slot
    assert sum(len(rows) for rows in run["attempts"].values()) == 34 * 5
    volatile = [t["task_id"] for t in want["tasks"] if t["volatile"]]
    assert volatile and set(run["explained"]) == set(volatile)


def test_html_without_out_is_refused_in_one_line(page_env: PageEnv) -> None:
    for args in (
        ("report", str(page_env.run_a)),
        ("compare", str(page_env.run_a), str(page_env.run_b)),
        ("trend", str(page_env.run_a.parent)),
    ):
        result = page_env.cli(*args, "--format", "html")
        assert result.returncode == 2, args
        assert result.stderr == "driftdesk: --format html needs --out FILE\n"


def _shapes(key: str) -> list[str]:
    raw = key.encode()
    return [
        key,
        base64.b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        urllib.parse.quote(key, safe=""),
        raw.hex(),
        key[8:],  # the key's tail, once its prefix is cut
    ]


def test_a_key_planted_in_recorded_calls_leaves_no_trace_in_the_page(
    page_env: PageEnv, run_copy: Path
) -> None:
    planted = (
        f"PLANTED-MARK {KEY} b64 {base64.b64encode(KEY.encode()).decode()} "
        f"url {urllib.parse.quote(KEY, safe='')} hex {KEY.encode().hex()} shaped {SHAPED_KEY}"
    )
    plant(run_copy, planted)
    html, _ = page_env.page("report", str(run_copy))
    assert "PLANTED-MARK" in html  # the planted text is on the page: only the keys are gone
    for shape in [*_shapes(KEY), SHAPED_KEY, SHAPED_KEY[12:]]:
        assert shape not in html, shape
    identity = page_data(html)["runs"][0]["identity"]
    assert identity["base_url"].startswith("http://127.0.0.1:") and "?" not in identity["base_url"]
    assert "user" not in identity["base_url"]


def test_recorded_markup_cannot_end_the_data_block(page_env: PageEnv, run_copy: Path) -> None:
    hostile = "</script><script>window.pwned=1</script><!-- <img src=x onerror=alert(1)>"
    plant(run_copy, hostile)
    html, _ = page_env.page("report", str(run_copy))
    assert "</script><script>window.pwned" not in html
    assert "<img src=x" not in html
    # and the text is still there, as data
    data = page_data(html)
    shown = json.dumps(data["runs"][0]["explained"], ensure_ascii=False)
    assert hostile.replace('"', '\\"') in shown


def test_redact_content_drops_prompts_and_answers_and_keeps_steps_shapes(
    page_env: PageEnv,
) -> None:
    full_html, _ = page_env.page("report", str(page_env.run_a))
    bare_html, _ = page_env.page("report", str(page_env.run_a), "--redact-content")
    assert PROMPT in full_html
    assert PROMPT not in bare_html
    full, bare = (page_data(h)["runs"][0]["explained"] for h in (full_html, bare_html))
    assert set(full) == set(bare)
    for task_id, shown in full.items():
        pair, kept = shown["pair"], bare[task_id]["pair"]
        assert (kept["pass"], kept["fail"], kept["action"]) == (
            pair["pass"],
            pair["fail"],
            pair["action"],
        )
        for side in ("pass_steps", "fail_steps"):
            # the same steps, kinds and tool names; no text
            assert [s[0] for s in kept[side]] == [s[0] for s in pair[side]]
            assert [[c[0] for c in s[2]] for s in kept[side]] == [
                [c[0] for c in s[2]] for s in pair[side]
            ]
            for step in kept[side]:
                if step[0] in ("user", "model", "tool_result") and step[1]:
                    assert step[1].startswith("(content left out)"), step


def test_a_no_bodies_run_gives_a_page_without_content(page_env: PageEnv) -> None:
    html, _ = page_env.page("report", str(page_env.no_bodies))
    assert PROMPT not in html
    data = page_data(html)
    assert data["runs"][0]["identity"]["bodies_recorded"] is False
    assert "recorded content left out" in html


def _inline_scripts(html: str) -> list[str]:
    return re.findall(r"<script>(.*?)</script>", html, re.DOTALL)


def test_the_csp_allows_only_the_pages_own_script_and_style(page_env: PageEnv) -> None:
    html, _ = page_env.page("report", str(page_env.run_a))
    (csp,) = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    rules = dict(rule.strip().split(" ", 1) for rule in csp.replace("&#x27;", "'").split(";"))
    assert rules["default-src"] == "'none'"
    assert "unsafe" not in csp
    scripts = _inline_scripts(html)
    assert len(scripts) == 2  # the headline's performance mark and the page's script
    hashes = {
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in scripts
    }
    assert set(rules["script-src"].split()) == hashes
    assert rules["img-src"] == "data:"
    assert not re.search(r"<(link|iframe|object|embed)\b", html)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)


def test_without_the_plots_library_the_page_is_whole_and_names_the_extra(
    page_env: PageEnv,
) -> None:
    out = page_env.root / "no-plots.html"
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"  # import matplotlib fails, as uninstalled
        "from driftdesk.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "report", str(page_env.run_a), "--format", "html", "--out", str(out)],
        capture_output=True, text=True, env=page_env.env, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    assert "<img" not in html
    assert "driftdesk[page]" in html
    assert 'data-figure="success_rate"' in html
    with_plots, _ = page_env.page("report", str(page_env.run_a))
    assert with_plots.count('src="data:image/svg+xml;base64,') == 3


def test_compare_and_trend_pages_hold_their_json(page_env: PageEnv) -> None:
    a, b = str(page_env.run_a), str(page_env.run_b)
    html, _ = page_env.page("compare", a, b)
    assert page_data(html)["compare"] == page_env.json("compare", a, b, "--format", "json")
    assert page_data(html)["compare"]["changed"]  # two endpoints of other seeds: tasks moved
    folder = str(page_env.run_a.parent.parent)
    html, _ = page_env.page("trend", folder + "/a", folder + "/b", "--agent", "all")
    assert page_data(html)["trend"] == page_env.json(
        "trend", folder + "/a", folder + "/b", "--agent", "all", "--json"
    )


def test_a_page_of_several_runs_holds_each_runs_report(page_env: PageEnv) -> None:
    a, b = str(page_env.run_a), str(page_env.run_b)
    html, _ = page_env.page("report", a, b)
    want = page_env.json("report", a, b, "--format", "json")["runs"]
    assert [run["report"] for run in page_data(html)["runs"]] == want
    assert html.count('<section class="run"') == 2


def test_top_keeps_only_the_listed_tasks_attempts(page_env: PageEnv) -> None:
    html, _ = page_env.page("report", str(page_env.run_a), "--top", "5")
    (run,) = page_data(html)["runs"]
    listed = {t["task_id"] for t in run["report"]["tasks"]}
    assert len(listed) == 5 and set(run["attempts"]) == listed
