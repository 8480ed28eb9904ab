"""The console's job form and intervals (issue 25, item 1): 'Every (interval)' is the third choice
beside 'Repeating (cron)' and 'Once (run_at)'. An interval job saved untouched writes nothing; a
cron job switched to an interval previews its fire times (elapsed time: no DST note) and sends the
schedule fields alone; a bad interval is marked on its field; the jobs page says `every 1h30m`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, go, text, wait
from tests.browser.test_form import OK, _open_edit, _save, _screenshot, _writes

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def test_an_interval_in_the_form_untouched_switched_to_and_refused(browser: Any, stack: Stack) -> None:
    from selenium.webdriver.support.ui import Select

    driver = browser
    body = {"name": "i-ninety", "every": "90m", "anchor": "2026-01-01T00:07:00Z", "timezone": "Europe/Berlin",
            "payload": OK}  # fmt: skip
    job = call(stack, "POST", "/api/jobs", body)
    _open_edit(driver, stack, job)
    assert find(driver, "#schedule_type").get_attribute("value") == "every"
    assert find(driver, "#field-every").is_displayed() and not find(driver, "#field-cron_expression").is_displayed()
    assert find(driver, "#every").get_attribute("value") == "1h30m"
    wait(driver, lambda d: "every 1h30m" in text(d, "#description"), what="the interval's words")
    _screenshot(driver, "form-interval")
    find(driver, "#save").click()
    wait(driver, lambda d: text(d, "#status") == "Nothing changed", what="an untouched save")
    assert _writes(driver) == []

    cron = call(stack, "POST", "/api/jobs", {"name": "i-cron", "cron_expression": "*/90 * * * *", "payload": OK})
    _open_edit(driver, stack, cron)
    Select(find(driver, "#schedule_type")).select_by_value("every")
    every = find(driver, "#every")
    every.clear()
    every.send_keys("0m")
    wait(driver, lambda d: "at least 1 s" in text(d, "#every-problem"), what="a zero interval marked")
    every.clear()
    every.send_keys("90m")
    wait(driver, lambda d: "every 1h30m" in text(d, "#description"), what="the interval's preview")
    assert "DST" in text(driver, "#description") and not driver.find_elements("css selector", "#preview .dst")
    _save(driver, stack, cron, "Saved: cron_expression, every")
    assert [json.loads(w["body"]) for w in _writes(driver)] == [{"cron_expression": None, "every": "90m"}]
    stored = call(stack, "GET", f"/api/jobs/{cron['id']}")
    assert (stored["cron_expression"], stored["every"], stored["revision"]) == (None, "1h30m", 2)

    go(driver, stack, f"#/jobs/{cron['id']}")
    wait(driver, lambda d: "every 1h30m" in text(d, "main") and "elapsed time" in text(d, "main"),
         what="the job page's schedule and its preview's words")  # fmt: skip
    go(driver, stack, "#/jobs")
    wait(driver, lambda d: "every 1h30m" in text(d, "main"), what="the jobs page's schedule column")
