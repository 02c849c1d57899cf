"""The page in a real browser (Debian's Chromium, headless, driven by Playwright), as the
person it was sent to opens it: from ``file://``, with no network.

It opens with no console error and no request but its own navigation; the figures shown are
``report --format json``'s; the task table sorts and filters; a volatile task shows a pass
beside a fail with ``explain``'s first divergence marked on both sides; recorded markup stays
text; comparison and trend pages open the same way; a big table is paged.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from page_helpers import PageEnv, open_page, page_data, plant

pytestmark = pytest.mark.keyring


def _value(report: dict[str, Any], key: str) -> Any:
    if key == "model_failures":
        return sum(t["fails"] for t in report["tasks"] + report["tasks_below_min_runs"])
    value: Any = report
    for part in key.split("."):
        value = value[part]
    return value


@pytest.mark.parametrize("which", ["run_a", "faulty"])
def test_the_page_opens_offline_and_shows_the_reports_figures(
    page_env: PageEnv, browser: Any, which: str
) -> None:
    run_dir = getattr(page_env, which)
    _, path = page_env.page("report", str(run_dir))
    report = page_env.json("report", str(run_dir), "--format", "json")
    opened = open_page(browser, path)
    page = opened.page
    assert opened.problems == []
    assert opened.requests == [path.as_uri()]  # the navigation, and nothing else
    shown = page.eval_on_selector_all(
        "section.run [data-figure]",
        "nodes => nodes.map(n => [n.dataset.figure, JSON.parse(n.dataset.value), n.textContent])",
    )
    keys = {key for key, _, _ in shown}
    assert {
        "success_rate",
        "consistency_gap_pp",
        "link_errors",
        "model_failures",
        "cost_usd",
    } <= keys
    assert {"injection.faults", "injection.recovered", "pass_hat_k.5"} <= keys
    for key, value, _ in shown:
        assert value == _value(report, key), key
    text = dict((key, words) for key, _, words in shown)
    assert f"{report['success_rate'] * 100:.1f}%" in text["success_rate"]
    low, high = report["ci95"]["success_rate"]
    assert f"95% CI {low * 100:.1f}–{high * 100:.1f}" in text["success_rate"]
    assert f"{report['consistency_gap_pp']:.1f} pp" in text["consistency_gap_pp"]
    # the run's identity, the key nowhere
    identity = page.inner_text("table.identity")
    assert "simulated-model-1" in identity and "sim" in identity
    # the headline is up well inside a second of navigation start (the page's own mark)
    mark = page.evaluate("performance.getEntriesByName('driftdesk-headline')[0].startTime")
    assert mark < 1000
    # every task is in the table, each with its flip strip of n attempts
    assert page.locator("section.run-tasks tbody tr").count() == len(report["tasks"])
    for task in report["tasks"]:
        strip = page.get_attribute(f'tr[data-task="{task["task_id"]}"] .strip', "data-strip")
        outcomes = strip.split(",")
        assert outcomes.count("pass") == task["passes"] and outcomes.count("fail") == task["fails"]
        assert outcomes.count("link_error") == task["link_errors"]
    if which == "faulty":  # the surfaced faults are on the page, apart from model failures
        assert report["link_errors"] > 0 and report["injection"]["surfaced"] > 0
        assert sum(t["link_errors"] for t in report["tasks"]) == report["link_errors"]


def _rows(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "section.run-tasks tbody tr", "rows => rows.map(r => r.dataset.task)"
    )


def test_the_task_table_sorts_and_filters(page_env: PageEnv, browser: Any) -> None:
    _, path = page_env.page("report", str(page_env.run_a))
    report = page_env.json("report", str(page_env.run_a), "--format", "json")
    tasks = report["tasks"]
    page = open_page(browser, path).page
    assert _rows(page) == [t["task_id"] for t in tasks]  # as the report sorts them: spread

    page.click('button[data-sort="success"]')  # numbers: highest first
    by_success = sorted(tasks, key=lambda t: t["success_rate"], reverse=True)
    assert _rows(page) == [t["task_id"] for t in by_success]
    page.click('button[data-sort="success"]')
    assert _rows(page) == [t["task_id"] for t in sorted(tasks, key=lambda t: t["success_rate"])]
    page.click('button[data-sort="task"]')
    assert _rows(page) == sorted(t["task_id"] for t in tasks)

    page.fill("section.run-tasks input[type=search]", "lookup")
    assert _rows(page) == sorted(t["task_id"] for t in tasks if "lookup" in t["task_id"])
    page.fill("section.run-tasks input[type=search]", "")
    page.check('input[data-toggle="volatile"]')
    volatile = sorted(t["task_id"] for t in tasks if t["volatile"])
    assert volatile and _rows(page) == volatile
    assert page.inner_text("section.run-tasks .count") == f"{len(volatile)} of {len(tasks)} shown"


def _expected_pair(explanation: dict[str, Any]) -> dict[str, Any]:
    """The pass/fail pair the page shows: the first diverging at the step most pairs do."""
    pairs = explanation["pair_divergences"]
    steps = Counter(p["step"] for p in pairs if p["step"] is not None)
    step = steps.most_common(1)[0][0]
    return next(p for p in pairs if p["step"] == step)


def test_a_volatile_tasks_pass_beside_a_fail_shows_explains_divergence(
    page_env: PageEnv, browser: Any
) -> None:
    _, path = page_env.page("report", str(page_env.run_a))
    report = page_env.json("report", str(page_env.run_a), "--format", "json")
    page = open_page(browser, path).page
    checked = 0
    for task in [t for t in report["tasks"] if t["volatile"]][:4]:
        explanation = page_env.json("explain", str(page_env.run_a), task["task_id"], "--json")
        want = _expected_pair(explanation)
        page.click(f'tr[data-task="{task["task_id"]}"] button.task')
        detail = page.locator("section.run-tasks [data-detail]")
        assert detail.locator("h3").inner_text() == f"Task {task['task_id']}"
        # its attempts, one row each
        assert detail.locator("table.attempts tbody tr").count() == task["n"] + task["link_errors"]
        assert (
            detail.locator(".pairs").get_attribute("data-pair") == f"{want['pass']}-{want['fail']}"
        )
        assert detail.locator(".divergence").get_attribute("data-divergence") == str(
            want["step"] + 1
        )
        for sentence in explanation["sentences"]:
            assert sentence in detail.locator("ul.sentences").inner_text()
        for side in ("pass", "fail"):
            marked = detail.locator(f'details[data-side="{side}"][data-diverge]')
            assert marked.count() == 1
            assert marked.get_attribute("open") is not None  # unfolded; the others folded
            action = want[f"{side}_action"]
            said = action.get("text") or action.get("name")
            assert said in marked.inner_text()
        assert detail.locator("details:not([data-diverge])[open]").count() == 0
        checked += 1
    assert checked


def test_recorded_markup_is_shown_as_text(page_env: PageEnv, run_copy: Path, browser: Any) -> None:
    hostile = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    plant(run_copy, hostile)
    html, path = page_env.page("report", str(run_copy))
    opened = open_page(browser, path)
    page = opened.page
    volatile = next(t for t in page_data(html)["runs"][0]["report"]["tasks"] if t["volatile"])
    page.click(f'tr[data-task="{volatile["task_id"]}"] button.task')
    page.click("details[data-diverge] >> nth=0")
    assert page.evaluate("window.pwned") is None
    assert page.locator("img[src=x]").count() == 0
    assert hostile in page.inner_text("[data-detail]")
    assert opened.problems == []
    assert opened.requests == [path.as_uri()]


def test_compare_and_trend_pages_open_offline(page_env: PageEnv, browser: Any) -> None:
    a, b = str(page_env.run_a), str(page_env.run_b)
    _, path = page_env.page("compare", a, b)
    comparison = page_env.json("compare", a, b, "--format", "json")
    opened = open_page(browser, path)
    assert opened.problems == [] and opened.requests == [path.as_uri()]
    page = opened.page
    for name, delta in comparison["delta"].items():
        shown = page.get_attribute(f'tr[data-delta="{name}"]', "data-value")
        assert json.loads(shown) == delta["value"]
    rows = page.eval_on_selector_all(
        "section.changed tbody tr", "rows => rows.map(r => r.dataset.task)"
    )
    assert rows == sorted(c["task_id"] for c in comparison["changed"])

    _, path = page_env.page("trend", a, b, "--agent", "all")
    trend = page_env.json("trend", a, b, "--agent", "all", "--json")
    opened = open_page(browser, path)
    assert opened.problems == [] and opened.requests == [path.as_uri()]
    page = opened.page
    assert page.locator("table.trend-runs tr[data-run]").count() == len(trend["runs"])
    assert page.locator("section.matrix-section tbody tr").count() == len(trend["tasks"])
    task = trend["tasks"][0]
    cells = page.eval_on_selector_all(
        f'section.matrix-section tr[data-task="{task["task_id"]}"] [data-success]',
        "cells => cells.map(c => c.dataset.success === '' ? null : Number(c.dataset.success))",
    )
    assert cells == task["success"]


def test_a_big_table_is_paged(page_env: PageEnv, tmp_path: Path, browser: Any) -> None:
    """250 tasks: one page of 100 rows in the document at a time; sorting and filtering work
    across pages."""
    rows = [
        {
            "run_id": "big",
            "task_id": f"t{i:04d}",
            "attempt": a,
            "outcome": "pass" if (i + a) % 3 else "fail",
        }
        for i in range(250)
        for a in range(4)
    ]
    attempts = tmp_path / "attempts.jsonl"
    attempts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, path = page_env.page("report", str(attempts))
    page = open_page(browser, path).page
    assert page.locator("section.run-tasks tbody tr").count() == 100
    assert page.inner_text("section.run-tasks .where") == "page 1 of 3"
    page.click('button[data-sort="task"]')
    page.click("section.run-tasks button.next")
    assert _rows(page)[0] == "t0100"
    page.click("section.run-tasks button.next")
    assert _rows(page)[-1] == "t0249" and len(_rows(page)) == 50
    page.fill("section.run-tasks input[type=search]", "t02")
    assert len(_rows(page)) == 50 and page.inner_text("section.run-tasks .where") == "page 1 of 1"


def test_a_link_to_a_task_opens_it(page_env: PageEnv, browser: Any) -> None:
    _, path = page_env.page("report", str(page_env.run_a))
    report = page_env.json("report", str(page_env.run_a), "--format", "json")
    volatile = next(t for t in report["tasks"] if t["volatile"])
    page = open_page(browser, path).page
    page.click(f'tr[data-task="{volatile["task_id"]}"] button.task')
    link = page.evaluate("location.href")
    assert link.endswith(f"#task={volatile['task_id']}")
    opened = open_page(browser, Path(path))  # a fresh context, then the link a reader got
    opened.page.goto(link)
    opened.page.reload()
    opened.page.wait_for_selector("body[data-ready]")
    assert opened.page.inner_text("[data-detail] h3") == f"Task {volatile['task_id']}"
    assert opened.page.locator("[data-detail] details[data-diverge]").count() == 2
    assert opened.problems == []


def test_the_wobbling_tasks_are_listed_with_why(page_env: PageEnv, browser: Any) -> None:
    html, path = page_env.page("report", str(page_env.run_a))
    run = page_data(html)["runs"][0]
    explained = run["explained"]
    assert run["explained_order"] == list(explained)  # the most volatile first
    page = open_page(browser, path).page
    listed = page.eval_on_selector_all(
        "[data-wobbling]", "items => items.map(i => i.dataset.wobbling)"
    )
    assert listed == list(explained)[:20] and listed
    first = listed[0]
    finding = explained[first]["finding"]
    assert finding in explained[first]["sentences"] and finding.startswith("step ")
    assert finding in page.inner_text(f'[data-wobbling="{first}"]')
    page.click(f'[data-wobbling="{first}"] button')
    assert page.inner_text("[data-detail] h3") == f"Task {first}"
