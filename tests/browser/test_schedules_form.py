"""The console's job form and several schedules per job (issue 40, item 1): the `More schedules` field
shows a job's entries one a line, the preview shows the union as you type, a bad entry is marked on
the field, an untouched save writes nothing, and an edit of the entries sends them alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, go, text, wait
from tests.browser.test_form import OK, _open_edit, _save, _screenshot, _writes

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]

ENTRIES = [{"cron": "0 17 * * 1-5"}, {"cron": "0 10 * * 6", "timezone": "UTC"},
           {"every": "1h30m", "anchor": "2026-01-01T00:00:00Z"}]  # fmt: skip


def _fires(driver: Any) -> int:
    return len(driver.find_elements("css selector", "#preview ol.fires li"))


def test_more_schedules_in_the_form_untouched_previewed_refused_and_edited(browser: Any, stack: Stack) -> None:
    driver = browser
    body = {"name": "s-office", "cron_expression": "0 8 * * 1-5", "timezone": "Europe/Paris", "payload": OK,
            "schedules": ENTRIES}  # fmt: skip
    job = call(stack, "POST", "/api/jobs", body)
    _open_edit(driver, stack, job)
    box = find(driver, "#schedules")
    assert box.get_attribute("value").splitlines() == [
        "0 17 * * 1-5",
        "TZ=UTC 0 10 * * 6",
        "every 1h30m from 2026-01-01T00:00:00Z",
    ]
    wait(driver, lambda d: text(d, "#description").count("; and ") == 3, what="the union's words")
    wait(driver, lambda d: text(d, "#schedule-diff").startswith("Same ticks as now"), what="no edit: no diff")
    _screenshot(driver, "form-schedules")
    find(driver, "#save").click()
    wait(driver, lambda d: text(d, "#status") == "Nothing changed", what="an untouched save")
    assert _writes(driver) == []

    _open_edit(driver, stack, job)
    box = find(driver, "#schedules")
    box.clear()
    box.send_keys("0 17 * * 1-5\n61 * * * *")
    wait(driver, lambda d: "schedules[1]" in text(d, "#schedules-problem") or "61" in text(d, "#schedules-problem"),
         what="a bad entry marked on its field")  # fmt: skip
    box.clear()
    box.send_keys("0 17 * * 1-5\nevery 90m")
    wait(driver, lambda d: "every 1h30m" in text(d, "#description") and text(d, "#schedules-problem") == "",
         what="the new union's preview")  # fmt: skip
    assert _fires(driver) == 5
    wait(driver, lambda d: "removed" in text(d, "#schedule-diff"), what="the edit's diff of the two unions")
    assert "0 ticks added" in text(driver, "#schedule-diff")  # every 90m from the epoch: the anchor's ticks
    _save(driver, stack, job, "Saved: schedules")
    assert [json.loads(w["body"]) for w in _writes(driver)] == [
        {"schedules": [{"cron": "0 17 * * 1-5"}, {"every": "90m"}]}
    ]
    stored = call(stack, "GET", f"/api/jobs/{job['id']}")
    assert (stored["schedules"], stored["revision"]) == ([{"cron": "0 17 * * 1-5"}, {"every": "1h30m"}], 2)

    go(driver, stack, f"#/jobs/{job['id']}")
    wait(driver, lambda d: "every 1h30m" in text(d, "#schedules") and "; and " in text(d, "main"),
         what="the job page's further schedules and the union's words")  # fmt: skip
