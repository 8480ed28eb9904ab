"""The run page's Cancel button (issue 24, item 4) in a real headless Chromium against `cronos dev`:
it asks first, then the running run's executor stops it and the page shows it cancelled."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, find_all, go, screenshot_artifact, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(90)]


def test_a_running_run_is_cancelled_from_its_page_after_a_confirm(browser: Any, stack: Stack) -> None:
    driver = browser
    job = call(stack, "POST", "/api/jobs", {
        "name": "long-export", "cron_expression": "@yearly", "payload": {"action": "sleep", "seconds": 600},
    })  # fmt: skip
    run = call(stack, "POST", f"/api/jobs/{job['id']}/trigger")
    go(driver, stack, f"#/runs/{run['id']}")
    wait(driver, lambda d: "running" in text(d, ".title"), timeout=30, what="the run running")
    find(driver, "#cancel-run").click()
    assert f"Stop the running run #{run['id']}?" in driver.switch_to.alert.text
    driver.switch_to.alert.dismiss()  # no: nothing happens
    assert call(stack, "GET", f"/api/runs/{run['id']}")["state"] == "running"
    find(driver, "#cancel-run").click()
    driver.switch_to.alert.accept()
    # The executor stops it at its next heartbeat; the page refreshes while the run is not over.
    wait(driver, lambda d: "cancelled" in text(d, ".title"), timeout=30, what="the run cancelled")
    assert "cancelled by local" in text(driver, ".error")
    assert not find_all(driver, "#cancel-run")  # an ended run has no Cancel button
    screenshot_artifact(driver, "run-cancelled")
