"""The console's job form and runs on every host (docs/every-host.md): a per-host job saved
untouched writes nothing; turning it on sends `hosts` alone (with its count and label); a refusal
is shown under the group; turning it off sends `hosts: null`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, text, wait
from tests.browser.test_form import OK, _open_edit, _save, _writes

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def test_hosts_in_the_form_untouched_turned_on_refused_and_off(browser: Any, stack: Stack) -> None:
    driver = browser
    body = {"name": "h-rotate", "cron_expression": "@daily", "concurrency_policy": "allow", "payload": OK,
            "hosts": {"count": 2, "label": "rack=eu-1"}}  # fmt: skip
    job = call(stack, "POST", "/api/jobs", body)
    _open_edit(driver, stack, job)
    assert find(driver, "#hosts").is_selected()
    assert find(driver, "#hosts_count").get_attribute("value") == "2"
    assert find(driver, "#hosts_label").get_attribute("value") == "rack=eu-1"
    find(driver, "#save").click()
    wait(driver, lambda d: text(d, "#status") == "Nothing changed", what="an untouched save")
    assert _writes(driver) == []

    plain = call(stack, "POST", "/api/jobs", {"name": "h-plain", "cron_expression": "@daily", "payload": OK})
    _open_edit(driver, stack, plain)
    assert not find(driver, "#hosts").is_selected()
    find(driver, "#hosts-box summary").click()
    find(driver, "#hosts").click()
    find(driver, "#save").click()  # the default overlap policy, forbid: refused, shown under the group
    wait(driver, lambda d: "concurrency_policy 'allow'" in text(d, "#hosts-problem"), what="the refusal")
    assert call(stack, "GET", f"/api/jobs/{plain['id']}").get("hosts") is None  # nothing written

    job2 = call(stack, "PATCH", f"/api/jobs/{plain['id']}", {"concurrency_policy": "allow"})
    _open_edit(driver, stack, job2)
    find(driver, "#hosts-box summary").click()
    find(driver, "#hosts").click()
    find(driver, "#hosts_count").send_keys("3")
    _save(driver, stack, job2, "Saved: hosts")
    assert [json.loads(w["body"]) for w in _writes(driver)] == [{"hosts": {"count": 3}}]
    assert call(stack, "GET", f"/api/jobs/{plain['id']}")["hosts"] == {"count": 3}

    _open_edit(driver, stack, call(stack, "GET", f"/api/jobs/{plain['id']}"))
    find(driver, "#hosts").click()  # off: one run per tick again
    _save(driver, stack, job2, "Saved: hosts")
    assert [json.loads(w["body"]) for w in _writes(driver)] == [{"hosts": None}]
    assert call(stack, "GET", f"/api/jobs/{plain['id']}").get("hosts") is None
