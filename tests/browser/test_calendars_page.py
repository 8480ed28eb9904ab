"""The console's Calendars page lists calendars and blackouts; the job form attaches calendars (an
edit sends that field alone); the job page shows a job's calendars and its timed pause (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, go, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def test_calendars_page_the_form_attaches_one_and_the_job_page_shows_a_timed_pause(browser: Any, stack: Stack) -> None:
    driver = browser
    holidays = {
        "timezone": "Europe/Berlin",
        "dates": ["2030-12-25"],
        "ranges": [{"from": "2030-12-31", "to": "2031-01-01"}],
    }
    call(stack, "PUT", "/api/calendars/b-holidays", holidays)
    call(stack, "PUT", "/api/calendars/b-weekdays", {"weekdays": ["mon", "tue", "wed", "thu", "fri"]})
    call(stack, "POST", "/api/blackouts", {"name": "b-sunday", "action": "defer", "cron_expression": "0 2 * * 0",
                                           "duration_s": 7200, "selector": {"queues": ["reports"]}})  # fmt: skip
    go(driver, stack, "#/calendars")
    wait(driver, lambda d: "b-sunday" in text(d, "#blackouts"), what="the calendars page")
    assert "2030-12-31 \u2013 2031-01-01" in text(driver, "#calendars") and "Europe/Berlin" in text(
        driver, "#calendars"
    )
    assert "queues reports" in text(driver, "#blackouts") and "defer" in text(driver, "#blackouts")

    job = call(stack, "POST", "/api/jobs", {"name": "b-cal", "cron_expression": "0 9 * * *",
                                            "payload": {"action": "browser.ok"}})  # fmt: skip
    go(driver, stack, f"#/jobs/{job['id']}/edit")
    wait(driver, lambda d: find(d, "#calendars"), what="the form's calendars field")
    field = find(driver, "#calendars")
    field.send_keys("b-weekdays:allow, b-nope:sometimes")
    find(driver, "#save").click()
    wait(driver, lambda d: "NAME or NAME:allow" in text(d, "#calendars-problem"), what="a bad calendar marked")
    field.clear()
    field.send_keys("b-weekdays:allow, b-holidays")
    find(driver, "#save").click()
    wait(driver, lambda d: d.current_url.endswith(f"#/jobs/{job['id']}") and "calendars" in text(d, "#status"),
         what="saved")  # fmt: skip
    revision = call(stack, "GET", f"/api/jobs/{job['id']}/revisions?limit=1")["items"][0]
    assert revision["changes"] == {"calendars": [{"name": "b-weekdays", "mode": "allow"},
                                                 {"name": "b-holidays", "mode": "exclude"}]}  # fmt: skip

    until = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    call(stack, "POST", f"/api/jobs/{job['id']}/pause", {"until": until.isoformat(), "note": "vendor is away"})
    go(driver, stack, f"#/jobs/{job['id']}")
    wait(driver, lambda d: "Paused until" in text(d, "main"), what="the timed pause on the job page")
    page = text(driver, "main")
    assert "vendor is away" in page and "b-weekdays:allow, b-holidays" in page
