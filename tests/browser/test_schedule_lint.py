"""The console's schedule lint (docs/schedule-lint.md): the editor shows a schedule's warnings as
it is typed and, editing a job, the ticks the new schedule adds and removes before saving; the
Fleet page charts planned starts per minute with the herd marked. Screenshots: /work/notes/lint-*.png
when that folder exists (the helper's note), else artifacts/browser/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, Stack
from tests.browser.test_console import call, find, find_all, go, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]

HERD = 5
STACK_ENV = {"CRONOS_HERD_JOBS": str(HERD)}
NOTES = Path("/work/notes")
OK = {"action": "browser.ok"}


def _shot(driver: Any, name: str) -> None:
    where = NOTES if NOTES.is_dir() else ARTIFACTS
    where.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(900, int(height) + 140), 2400))
    driver.save_screenshot(str(where / f"lint-{name}.png"))
    driver.set_window_size(1280, 900)


def _type(driver: Any, css: str, value: str) -> None:
    field = find(driver, css)
    field.clear()
    field.send_keys(value)


def _codes(driver: Any) -> list[str]:
    return [li.get_attribute("data-code") for li in find_all(driver, "#schedule-warnings li")]


def test_the_editor_warns_as_the_schedule_is_typed(browser: Any, stack: Stack) -> None:
    driver = browser
    go(driver, stack, "#/new")
    wait(driver, lambda d: text(d, "#description"), what="the first preview")
    _type(driver, "#cron_expression", "*/90 * * * *")
    wait(driver, lambda d: _codes(d) == ["step_exceeds_field"], what="the step warning")
    assert text(driver, "#description") == "at minute 0 of every hour"
    assert "every: 90m" in text(driver, "#schedule-warnings")
    _type(driver, "#cron_expression", "0 9 1-7 * 1")
    wait(driver, lambda d: _codes(d) == ["days_ored"], what="the ORed days warning")
    assert "0 9 * * 1#1" in text(driver, "#schedule-warnings")
    _shot(driver, "form-warnings")
    _type(driver, "#cron_expression", "5/10 * * * *")  # n/step (issue 40): accepted, and said in full
    wait(driver, lambda d: _codes(d) == ["step_from"], what="the n/step warning")
    assert text(driver, "#description") == "at minute 5-59/10"
    assert "means `5-59/10`: minute 5, 15, 25, 35, …, 55" in text(driver, "#schedule-warnings")
    _type(driver, "#cron_expression", "*/5 * * * *")
    wait(driver, lambda d: not find_all(d, "#schedule-warnings") and "every 5 minutes" in text(d, "#description"))


def test_an_edit_shows_the_ticks_it_adds_and_removes_before_saving(browser: Any, stack: Stack) -> None:
    driver = browser
    job = call(stack, "POST", "/api/jobs", {"name": "lint-nightly", "cron_expression": "30 3 * * *",
                                            "timezone": "Europe/Berlin", "payload": OK})  # fmt: skip
    go(driver, stack, f"#/jobs/{job['id']}/edit")
    wait(driver, lambda d: "Same ticks as now" in text(d, "#schedule-diff"), what="an unchanged schedule's diff")
    _type(driver, "#cron_expression", "30 2 * * *")
    wait(driver, lambda d: "7 ticks added, 7 removed" in text(d, "#schedule-diff"), what="the diff")
    shown = (len(find_all(driver, "#schedule-diff li.added")), len(find_all(driver, "#schedule-diff li.removed")))
    assert shown == (6, 6) and "+ … 1 more" in text(driver, "#schedule-diff")  # six a side, the rest counted
    assert {"dst_gap", "dst_fold"} <= set(_codes(driver))
    _shot(driver, "edit-diff")
    assert call(stack, "GET", f"/api/jobs/{job['id']}")["cron_expression"] == "30 3 * * *"  # nothing saved


def test_the_fleet_page_shows_a_herd_at_the_top_of_the_hour(browser: Any, stack: Stack) -> None:
    driver = browser
    for n in range(HERD + 2):
        call(stack, "POST", "/api/jobs", {"name": f"lint-herd-{n}", "cron_expression": "0 * * * *", "payload": OK})
    for n, expression in enumerate(("*/15 * * * *", "7 */2 * * *", "30 9 * * *")):
        call(stack, "POST", "/api/jobs", {"name": f"lint-other-{n}", "cron_expression": expression, "payload": OK})
    call(stack, "POST", "/api/jobs", {"name": "lint-jittered", "cron_expression": "0 * * * *", "jitter_s": 900,
                                      "payload": OK})  # fmt: skip
    go(driver, stack, "#/fleet")
    wait(driver, lambda d: find_all(d, "#fleet-chart rect.bar.herd"), timeout=40, what="the herd's bars")
    assert find(driver, "nav a[data-nav='fleet']").get_attribute("aria-current") == "page"
    herd_bars = find_all(driver, "#fleet-chart rect.bar.herd")
    assert len(herd_bars) == 24  # every top of the hour over the next day (the jittered job spreads)
    assert "reach 5" in text(driver, "#fleet-herds")
    busiest = find_all(driver, "table.grid tbody tr")
    assert busiest and HERD + 2 <= int(busiest[0].text.split()[-1]) <= HERD + 4  # + */15, maybe the jittered one
    _shot(driver, "fleet")
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert [m for m in errors if "Failed to load resource" not in m] == []


def test_h_shows_the_value_the_name_picks_and_the_fleet_the_peak_it_flattens(browser: Any, stack: Stack) -> None:
    """Issue 40 item 2: typing `H` (and the name) shows this job's minute; the Fleet page says how
    many jobs H spreads and the peak they would make without it."""
    driver = browser
    go(driver, stack, "#/new")
    wait(driver, lambda d: text(d, "#description"), what="the first preview")
    _type(driver, "#name", "cache-warm")
    _type(driver, "#cron_expression", "H * * * *")
    wait(driver, lambda d: "hashed" in _codes(d), what="the H note")
    assert text(driver, "#description") == "every hour at minute 14"
    assert "`H` in the minute field is `14` for the job named 'cache-warm'" in text(driver, "#schedule-warnings")
    _type(driver, "#name", "report-eu")  # another name, another minute, without touching the expression
    wait(driver, lambda d: text(d, "#description") == "every hour at minute 23", what="the new name's minute")
    for n in range(6):
        call(stack, "POST", "/api/jobs", {"name": f"spread-{n}", "cron_expression": "H * * * *", "payload": OK})
    go(driver, stack, "#/fleet")
    wait(driver, lambda d: "6 jobs" in text(d, "#fleet-spread"), timeout=40, what="the spread jobs")
    said = text(driver, "#fleet-spread")  # the module's other jobs share the :00 minute the six would herd in
    assert "without it the busiest minute would have" in said and int(said.split()[-2]) >= 6, said
    _shot(driver, "fleet-spread")
