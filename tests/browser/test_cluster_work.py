"""The console's cluster page shows each queue (lag, pending, consumers), each executor with its
queues, task actions and share of the runs, and the actions no live executor serves; the job form
tells a saved job's warning (no live executor serves its action). A real `cronos dev` stack and
headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, find_all, go, screenshot_artifact, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(90)]


def _cells(driver: Any, label: str) -> list[str]:
    return [c.text for c in find_all(driver, f"td[data-label='{label}']")]


def test_the_cluster_page_shows_queues_executors_their_actions_and_an_unserved_one(browser: Any, stack: Stack) -> None:
    driver = browser
    body = {"name": "nobody-runs-me", "cron_expression": "* * * * * *", "payload": {"action": "nobody.here"}}
    job = call(stack, "POST", "/api/jobs", body)
    assert "serves action 'nobody.here'" in job["warnings"][0]["message"], job
    go(driver, stack, "#/cluster")
    wait(driver, lambda d: any("browser.ok" in a for a in _cells(d, "Actions")), what="the executor's actions")
    assert stack.node_id in _cells(driver, "Executor")
    assert set(_cells(driver, "Shell")) <= {"allowed", "off"}  # what it announced (CRONOS_ALLOW_SHELL)
    wait(driver, lambda d: "default" in _cells(d, "Queue") and any(stack.node_id in c for c in _cells(d, "Consumers")),
         what="the default queue and its consumer")  # fmt: skip
    wait(driver, lambda d: "nobody.here" in text(d, "#unserved"), timeout=40, what="the unserved action reported")
    screenshot_artifact(driver, "cluster-work")
    call(stack, "DELETE", f"/api/jobs/{job['id']}")


def test_the_cluster_page_shows_each_executors_share_of_the_runs(browser: Any, stack: Stack) -> None:
    driver = browser
    body = {"name": "share-me", "cron_expression": "* * * * * *", "payload": {"action": "browser.ok"}}
    job = call(stack, "POST", "/api/jobs", body)
    go(driver, stack, "#/cluster")
    # The only executor started every run: all of the share, and a last claim a moment ago.
    wait(driver, lambda d: _cells(d, "Share") == ["100.0 %"], timeout=40, what="the executor's share")
    (runs,) = _cells(driver, "Runs started")
    assert runs.split(" in ")[0].isdigit() and int(runs.split(" in ")[0]) > 0, runs
    (claimed,) = _cells(driver, "Last claimed")
    assert claimed.endswith(" ago"), claimed
    screenshot_artifact(driver, "cluster-share")
    call(stack, "DELETE", f"/api/jobs/{job['id']}")


def test_the_form_tells_the_warning_of_a_saved_job(browser: Any, stack: Stack) -> None:
    driver = browser
    go(driver, stack, "#/new")
    wait(driver, lambda d: find(d, "#name"), what="the form").send_keys("unserved-by-form")
    cron = find(driver, "#cron_expression")
    cron.clear()
    cron.send_keys("0 9 * * *")
    payload = find(driver, "#payload")
    payload.clear()
    payload.send_keys('{"action": "nobody.else"}')
    find(driver, "#save").click()
    wait(driver, lambda d: "#/jobs/" in d.current_url, what="the job page")
    assert "Warning: no live executor of queue 'default' serves action 'nobody.else'" in text(driver, "#status")
