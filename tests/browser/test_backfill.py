"""The console's side of issue 25, items 3 and 4: the job page's Backfill… dialog (a dry run lists
the ticks, Queue queues them) and the jobs page's Labels filter (a selector; a bad one says why)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import LAPTOP, call, find, find_all, go, screenshot_artifact, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(90)]


def _edit(driver: Any, css: str, value: str) -> None:
    field = find(driver, css)
    driver.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
                          field, value)  # fmt: skip


def _dialog_open(driver: Any) -> bool:
    return bool(driver.execute_script("return !!document.querySelector('#backfill-dialog[open]')"))


def test_backfill_dialog_dry_run_then_queue(browser: Any, stack: Stack) -> None:
    driver = browser
    job = call(stack, "POST", "/api/jobs", {"name": "backfilled", "cron_expression": "* * * * * *",
                                            "status": "paused", "payload": {"action": "browser.echo"}})  # fmt: skip
    created = datetime.fromisoformat(job["created_at"])
    # Two whole ticks pass while it is paused, before the dialog's `to` (now, cut to the second).
    past = created + timedelta(seconds=3.2)
    wait(driver, lambda _d: datetime.now(UTC) > past, what="two ticks to pass")
    go(driver, stack, f"#/jobs/{job['id']}")
    wait(driver, lambda d: find(d, "#backfill"), what="the job page").click()
    wait(driver, lambda d: find(d, "#backfill-dialog[open] #backfill-from"), what="the dialog")
    _edit(driver, "#backfill-from", "2026-13-01")
    find(driver, "#backfill-dry-run").click()
    wait(driver, lambda d: "$.from" in text(d, "#backfill-error"), what="the API's refusal of the date")
    assert find(driver, "#backfill-from").get_attribute("aria-invalid") == "true"
    assert find(driver, "#backfill-queue").get_attribute("disabled") is not None

    _edit(driver, "#backfill-from", job["created_at"])
    find(driver, "#backfill-dry-run").click()
    summary = wait(driver, lambda d: text(d, "#backfill-summary"), what="the dry run")
    assert find(driver, "#backfill-from").get_attribute("aria-invalid") == "false"
    ticks = [cell.text for cell in find_all(driver, "#backfill-preview td[data-label='Tick']")]
    assert len(ticks) >= 2 and f"would queue {len(ticks)}" in summary, summary
    assert {cell.text for cell in find_all(driver, "#backfill-preview td[data-label='State now']")} == {"none"}
    assert call(stack, "GET", f"/api/jobs/{job['id']}/runs")["items"] == []  # a dry run writes nothing
    screenshot_artifact(driver, "backfill-dry-run")

    find(driver, "#backfill-queue").click()
    wait(driver, lambda d: not _dialog_open(d), what="the dialog to close")
    runs = call(stack, "GET", f"/api/jobs/{job['id']}/runs")["items"]
    assert len(runs) >= len(ticks) and {r["trigger"] for r in runs} == {"backfill"}, runs
    assert sorted(r["scheduled_for"] for r in runs)[: len(ticks)] == sorted(ticks)


def test_the_jobs_page_filters_by_label_selector(browser: Any, stack: Stack) -> None:
    driver = browser
    for name, labels in (("lab-data", {"team": "data"}), ("lab-web", {"team": "web", "env": "prod"})):
        call(stack, "POST", "/api/jobs", {"name": name, "cron_expression": "@yearly", "labels": labels,
                                          "payload": {"action": "browser.echo"}})  # fmt: skip
    go(driver, stack, "#/jobs")
    names = "#jobs td[data-label='Name']"
    wait(driver, lambda d: find(d, "#label-filter"), what="the jobs page")
    _edit(driver, "#label-filter", "team=data")
    driver.execute_script("document.querySelector('#label-filter').dispatchEvent(new Event('change'))")
    wait(driver, lambda d: [c.text for c in find_all(d, names)] == ["lab-data"], what="the data team's job only")
    _edit(driver, "#label-filter", "team,env!=prod")
    driver.execute_script("document.querySelector('#label-filter').dispatchEvent(new Event('change'))")
    wait(driver, lambda d: [c.text for c in find_all(d, names)] == ["lab-data"], what="the selector again")
    _edit(driver, "#label-filter", "team in (")
    driver.execute_script("document.querySelector('#label-filter').dispatchEvent(new Event('change'))")
    wait(driver, lambda d: "selector" in text(d, "#jobs"), what="the refusal of a bad selector")
    assert find(driver, "#label-filter").get_attribute("aria-invalid") == "true"
    driver.set_window_size(*LAPTOP)
