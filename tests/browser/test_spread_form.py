"""The console's job form and a spread window (issue 40, item 2): the `Spread` field shows the job's
spread, the preview moves each fire time by the offset the name picks as you type, a spread too wide
for the schedule is marked on the field, an untouched save writes nothing, and an edit of the spread
sends it alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, text, wait
from tests.browser.test_form import OK, _open_edit, _save, _writes

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def test_spread_in_the_form_untouched_previewed_refused_and_edited(browser: Any, stack: Stack) -> None:
    driver = browser
    job = call(stack, "POST", "/api/jobs", {"name": "cache-warm", "cron_expression": "0 * * * *", "payload": OK,
                                            "spread": "10m"})  # fmt: skip
    _open_edit(driver, stack, job)
    assert find(driver, "#spread").get_attribute("value") == "10m"
    wait(driver, lambda d: "each tick 57s later (spread 10m)" in text(d, "#description"), what="the spread's words")
    wait(driver, lambda d: ":00:57" in text(d, "#preview ol.fires"), what="fire times moved by 57 s")
    find(driver, "#save").click()
    wait(driver, lambda d: text(d, "#status") == "Nothing changed", what="an untouched save")
    assert _writes(driver) == []

    _open_edit(driver, stack, job)
    spread = find(driver, "#spread")
    spread.clear()
    spread.send_keys("1h")
    wait(driver, lambda d: "shortest gap" in text(d, "#spread-problem"), what="a spread too wide, on its field")
    spread.clear()
    spread.send_keys("20m")
    wait(driver, lambda d: "(spread 20m)" in text(d, "#description") and text(d, "#spread-problem") == "",
         what="the new spread's preview")  # fmt: skip
    _save(driver, stack, job, "Saved: spread")
    assert [json.loads(w["body"]) for w in _writes(driver)] == [{"spread": "20m"}]
    assert call(stack, "GET", f"/api/jobs/{job['id']}")["spread"] == "20m"
