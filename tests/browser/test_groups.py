"""The console's concurrency groups (issue 25, item 5): the job form's group field sends the group
alone (and an unknown one is marked on the field), the groups page shows a group's limit and its
jobs, and sets the limit."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, go, text, wait
from tests.browser.test_form import _open_edit, _save, _writes

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def _set_group(driver: Any, name: str) -> None:
    field = find(driver, "#concurrency_group")
    if not field.is_displayed():
        find(driver, "#policies summary").click()
    field.clear()
    field.send_keys(name)


def test_the_form_names_a_group_and_the_groups_page_shows_and_sets_its_limit(browser: Any, stack: Stack) -> None:
    driver = browser
    assert call(stack, "PUT", "/api/concurrency-groups/warehouse", {"limit": 1})["limit"] == 1
    job = call(stack, "POST", "/api/jobs", {"name": "g-load", "cron_expression": "@yearly", "payload": {"action": "x"}})
    assert job["concurrency_group"] is None

    _open_edit(driver, stack, job)
    _set_group(driver, "nowhere")
    find(driver, "#save").click()
    wait(driver, lambda d: "concurrency_group" in text(d, "#concurrency_group-problem"), what="the field's problem")
    assert "no concurrency group named 'nowhere'" in text(driver, "#concurrency_group-problem")

    _open_edit(driver, stack, job)
    _set_group(driver, "warehouse")
    _save(driver, stack, job, "Saved")
    assert [w["body"] for w in _writes(driver)] == ['{"concurrency_group":"warehouse"}']
    assert call(stack, "GET", f"/api/jobs/{job['id']}")["concurrency_group"] == "warehouse"

    go(driver, stack, "#/groups/warehouse")
    wait(driver, lambda d: text(d, "h1") == "Group warehouse" and "g-load" in text(d, "main"), what="the group")
    assert text(driver, "#group-limit-value") == "1"
    limit = find(driver, "#group-limit")
    limit.clear()
    limit.send_keys("3")
    find(driver, "#group-form button").click()
    wait(driver, lambda d: text(d, "#group-limit-value") == "3", what="the new limit")
    assert call(stack, "GET", "/api/concurrency-groups/warehouse")["limit"] == 3

    go(driver, stack, "#/groups")
    wait(driver, lambda d: "warehouse" in text(d, "main table"), what="the groups list")
