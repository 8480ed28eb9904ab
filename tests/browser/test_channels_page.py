"""The console's Channels page (api/ui/pages/channels.js) in headless Chromium against `cronos dev`:
add a webhook channel (its signing secret shown once), send a test, see the delivery's state."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, find_all, go, screenshot_artifact, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(90)]


def test_add_a_channel_send_a_test_and_watch_its_delivery(browser: Any, stack: Stack) -> None:
    driver = browser
    call(stack, "POST", "/api/channels", {"name": "team-chat", "kind": "slack",
                                          "url": "https://hooks.slack.com/services/T0/B0/secret-part"})  # fmt: skip
    go(driver, stack, "#/channels")
    wait(driver, lambda d: "team-chat" in text(d, "#channels"), what="the channel listed")
    assert "secret-part" not in text(driver, "main")  # the Slack URL is write-only: ***
    assert find(driver, "a[data-nav='channels']").get_attribute("aria-current") == "page"
    find(driver, "#ch-name").send_keys("ops-hook")
    find(driver, "#ch-url").send_keys("https://hooks.example.com/cronos")
    find(driver, "#ch-events").clear()
    find(driver, "#ch-events").send_keys("failed,missed")
    find(driver, "#channel-form button[type='submit']").click()
    wait(driver, lambda d: "whsec_" in text(d, "#ch-secret"), what="the drawn signing secret, shown once")
    wait(driver, lambda d: "ops-hook" in text(d, "#channels"), what="the new channel listed")
    created = next(c for c in call(stack, "GET", "/api/channels")["items"] if c["name"] == "ops-hook")
    assert created["events"] == ["failed", "missed"] and created["secret"] == "***"
    row = next(r for r in find_all(driver, "#channels tbody tr") if "ops-hook" in r.text)
    row.find_element("css selector", "button.test").click()
    wait(driver, lambda d: "test" in text(d, "#deliveries"), what="the test delivery listed")
    states = {c.text for c in find_all(driver, "#deliveries td[data-label='State']")}
    assert states <= {"pending", "sent", "failed"}, states
    screenshot_artifact(driver, "channels")
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert [m for m in errors if "Failed to load resource" not in m] == []


def test_a_channel_names_the_jobs_it_applies_to(browser: Any, stack: Stack) -> None:
    # It showed "jobs 3": an id where every other page shows the job's name (issue 37).
    driver = browser
    job = call(stack, "POST", "/api/jobs", {"name": "nightly-export", "cron_expression": "0 3 * * *",
                                           "payload": {"action": "reindex"}})  # fmt: skip
    call(stack, "POST", "/api/channels", {"name": "export-watch", "kind": "slack", "jobs": [job["id"]],
                                          "url": "https://hooks.slack.com/services/T0/B0/other-part"})  # fmt: skip
    go(driver, stack, "#/channels")
    wait(driver, lambda d: "export-watch" in text(d, "#channels"), what="the channel listed")
    row = next(r for r in find_all(driver, "#channels tbody tr") if "export-watch" in r.text)
    applies = row.find_element("css selector", "td[data-label='Applies to']")
    wait(driver, lambda d: applies.text == "job nightly-export", what=f"the job's name, not {applies.text!r}")
    link = applies.find_element("css selector", "a").get_attribute("href")
    assert link.endswith(f"#/jobs/{job['id']}"), link
