"""The console's Runs page (filters kept in the URL), its failures count in the header, "Retry this
run" on a run's page and a job's history section, in headless Chromium against a real `cronos dev`.

One stack and one browser for the module; the tests run in file order. Screenshots go to
artifacts/browser/ (runs-page.png, runs-job-history.png).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, Stack
from tests.browser.test_console import call, find, find_all, go, text, wait
from tests.waiting import block_until

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(90)]


def _ended(stack: Stack, run_id: int) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        run = call(stack, "GET", f"/api/runs/{run_id}")
        return run if run["state"] in ("completed", "failed", "skipped") else None

    return block_until(ended, timeout=30, what=f"run {run_id} ended")


@pytest.fixture(scope="module")
def runs(stack: Stack) -> dict[str, Any]:
    """A job whose task fails (no retries) and one whose task succeeds, each triggered once, ended."""
    breaks = call(stack, "POST", "/api/jobs", {
        "name": "breaks", "cron_expression": "@yearly", "payload": {"action": "browser.fail"}, "max_retries": 0,
    })  # fmt: skip
    fine = call(
        stack, "POST", "/api/jobs", {"name": "fine", "cron_expression": "@yearly", "payload": {"action": "browser.ok"}}
    )
    failed = _ended(stack, call(stack, "POST", f"/api/jobs/{breaks['id']}/trigger")["id"])
    completed = _ended(stack, call(stack, "POST", f"/api/jobs/{fine['id']}/trigger")["id"])
    assert (failed["state"], completed["state"]) == ("failed", "completed")
    return {"breaks": breaks, "fine": fine, "failed": failed, "completed": completed}


def _shown(driver: Any) -> list[str]:
    return [a.text for a in find_all(driver, "#runs td[data-label='Run'] a")]


def test_the_runs_page_filters_by_state_and_job_and_keeps_them_in_the_url(
    browser: Any, stack: Stack, runs: dict[str, Any]
) -> None:
    driver = browser
    failed, completed = f"#{runs['failed']['id']}", f"#{runs['completed']['id']}"
    go(driver, stack, "#/runs")
    wait(driver, lambda d: {failed, completed} <= set(_shown(d)), what="both runs listed")
    # the header counts the failure of the last 24 h, and links to the filtered page
    link = wait(driver, lambda d: find(d, "#failures") if text(d, "#failures") == "Failed (24 h): 1" else None,
                what="the failures count")  # fmt: skip
    assert link.get_attribute("href").endswith("#/runs?state=failed&since=24h")

    find(driver, "#state-filter input[value='failed']").click()
    wait(driver, lambda d: _shown(d) == [failed], what="only the failed run")
    assert driver.current_url.endswith("#/runs?state=failed")
    job = find(driver, "#job-filter")
    job.send_keys(str(runs["fine"]["id"]))
    wait(driver, lambda d: "No run matches." in text(d, "#runs"), what="no failed run of job fine")
    assert driver.current_url.endswith(f"#/runs?state=failed&job={runs['fine']['id']}")

    go(driver, stack, f"#/runs?job={runs['breaks']['id']}&since=24h")  # a shared link opens the same view
    wait(driver, lambda d: _shown(d) == [failed], what="the job's runs")
    assert find(driver, "#job-filter").get_attribute("value") == str(runs["breaks"]["id"])
    assert find(driver, "#since-filter").get_attribute("value") == "24h"
    names = [c.text for c in find_all(driver, "#runs td[data-label='Job']")]
    assert names == ["breaks"]

    find(driver, "#failures").click()
    wait(driver, lambda d: _shown(d) == [failed] and d.current_url.endswith("state=failed&since=24h"),
         what="the failures link's view")  # fmt: skip
    assert find(driver, "#state-filter input[value='failed']").is_selected()


def test_retry_this_run_queues_the_next_attempt_of_its_tick(browser: Any, stack: Stack, runs: dict[str, Any]) -> None:
    driver = browser
    first = runs["failed"]
    go(driver, stack, f"#/runs/{runs['completed']['id']}")
    wait(driver, lambda d: text(d, "h1") == f"Run #{runs['completed']['id']}", what="the completed run's page")
    assert not find_all(driver, "#retry")  # a completed run is not retried

    go(driver, stack, f"#/runs/{first['id']}")
    button = wait(driver, lambda d: find(d, "#retry"), what="the retry button")
    button.click()
    wait(driver, lambda d: d.current_url.rsplit("/", 1)[1] != str(first["id"]), what="the new run's page")
    again = call(stack, "GET", f"/api/runs/{int(driver.current_url.rsplit('/', 1)[1])}")
    assert (again["job_id"], again["scheduled_for"], again["attempt"], again["trigger"]) == (
        first["job_id"], first["scheduled_for"], 2, "retry",
    )  # fmt: skip
    wait(driver, lambda d: text(d, "h1") == f"Run #{again['id']}", what="the new run's title")
    assert _ended(stack, again["id"])["state"] == "failed"  # the task fails again: it did run

    # a second retry of the first attempt: the tick's newest attempt is ended, so attempt 3
    go(driver, stack, f"#/runs/{first['id']}")
    wait(driver, lambda d: find(d, "#retry"), what="the retry button again").click()
    wait(driver, lambda d: d.current_url.rsplit("/", 1)[1] not in (str(first["id"]), str(again["id"])),
         what="attempt 3's page")  # fmt: skip
    third = call(stack, "GET", f"/api/runs/{int(driver.current_url.rsplit('/', 1)[1])}")
    assert third["attempt"] == 3
    _ended(stack, third["id"])

    go(driver, stack, "#/runs")  # the three attempts of the tick, newest first
    wait(driver, lambda d: _shown(d)[:3] == [f"#{third['id']}", f"#{again['id']}", f"#{runs['completed']['id']}"],
         what="the retries listed first")  # fmt: skip
    wait(driver, lambda d: text(d, "#failures") == "Failed (24 h): 3", what="three failures counted")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / "runs-page.png"))


def test_the_job_page_shows_its_revisions_and_audit_history(browser: Any, stack: Stack, runs: dict[str, Any]) -> None:
    driver = browser
    job = runs["breaks"]
    call(stack, "PATCH", f"/api/jobs/{job['id']}", {"timeout_s": 12})
    go(driver, stack, f"#/jobs/{job['id']}")
    wait(driver, lambda d: len(find_all(d, "#revisions tbody tr")) == 2, what="the two revisions")
    revisions = [c.text for c in find_all(driver, "#revisions td[data-label='Revision']")]
    assert revisions == ["#2", "#1"]
    assert "timeout_s → 12" in text(driver, "#revisions")
    actions = wait(driver, lambda d: [c.text for c in find_all(d, "#audit td[data-label='Action']")] or None,
                   what="the audit history")  # fmt: skip
    assert actions[:3] == ["updated", "run_retried", "run_retried"] and actions[-1] == "created", actions
    assert not find(driver, "#audit-more").is_displayed()  # five entries: one page
    assert "retried as" in text(driver, "#audit") and "timeout_s" in text(driver, "#audit")
    history = find(driver, "#history")
    driver.execute_script("arguments[0].scrollIntoView()", history)
    history.screenshot(str(ARTIFACTS / "runs-job-history.png"))
