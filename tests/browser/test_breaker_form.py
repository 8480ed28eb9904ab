"""The job form's circuit breaker and the job's trigger URLs (issue 40, items 4 and 7).

The breaker's two settings sit under Expectations: a job saved untouched writes nothing, one
setting changed sends `expectations` with the other settings and expectations as they were. Under
the form, the job's trigger URLs: one made shows its secret once (the list never does), works
with the hook, and once revoked the hook answers 404; none of it goes through the form's Save.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, find_all, go, text, wait
from tests.browser.test_form import _SPY, _writes
from tests.waiting import block_until

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]

OK = {"action": "browser.ok"}


def _open_edit(driver: Any, stack: Stack, job: dict[str, Any]) -> None:
    go(driver, stack, f"#/jobs/{job['id']}/edit")
    wait(driver, lambda d: text(d, "h1") == f"Edit {job['name']}" and find(d, "#save"), what="the job's form")
    wait(driver, lambda d: find(d, "#triggers-list").text != "", what="the trigger URLs")
    driver.execute_script(_SPY)


def _set(driver: Any, css: str, value: str) -> None:
    field = find(driver, css)
    driver.execute_script("arguments[0].closest('details').open = true", field)
    field.clear()
    if value:
        field.send_keys(value)


def test_the_breaker_in_the_form_changes_what_was_changed_alone(browser: Any, stack: Stack) -> None:
    driver = browser
    expectations = {"success_every_s": 3600, "breaker": {"failures": 3, "canary_every": 5}}
    job = call(stack, "POST", "/api/jobs", {"name": "b-form", "cron_expression": "@hourly", "payload": OK,
                                            "expectations": expectations})  # fmt: skip
    go(driver, stack, f"#/jobs/{job['id']}")  # the job page says it
    wait(driver, lambda d: "pauses after 3 failed runs in a row; a canary every 5 ticks" in text(d, "#breaker-setting"),
         what="the job's breaker on its page")  # fmt: skip
    _open_edit(driver, stack, job)
    assert find(driver, "#breaker_failures").get_attribute("value") == "3"
    assert find(driver, "#breaker_canary_every").get_attribute("value") == "5"
    find(driver, "#save").click()
    wait(driver, lambda d: d.current_url.endswith(f"#/jobs/{job['id']}"), what="the untouched save")
    assert _writes(driver) == []
    assert call(stack, "GET", f"/api/jobs/{job['id']}")["revision"] == 1

    _open_edit(driver, stack, job)
    _set(driver, "#breaker_canary_every", "10")
    find(driver, "#save").click()
    wait(driver, lambda d: "Saved: expectations" in text(d, "#status"), what="the canary's change saved")
    [sent] = _writes(driver)
    changed = {"success_every_s": 3600, "breaker": {"failures": 3, "canary_every": 10}}
    assert json.loads(sent["body"]) == {"expectations": changed}
    assert call(stack, "GET", f"/api/jobs/{job['id']}")["expectations"] == changed

    _open_edit(driver, stack, job)
    _set(driver, "#breaker_failures", "")  # back to the cluster's
    find(driver, "#save").click()
    stored = {"success_every_s": 3600, "breaker": {"canary_every": 10}}
    block_until(lambda: call(stack, "GET", f"/api/jobs/{job['id']}")["expectations"] == stored, timeout=20,
                what="the threshold removed")  # fmt: skip
    assert [json.loads(w["body"]) for w in _writes(driver)] == [{"expectations": stored}]

    _open_edit(driver, stack, job)
    _set(driver, "#breaker_failures", "-1")
    driver.execute_script("document.querySelector('#breaker_failures').min = ''")  # past the browser's check
    find(driver, "#save").click()
    wait(driver, lambda d: "$.expectations.breaker.failures" in text(d, "#expectations-problem")
         or ">= 0" in text(d, "#expectations-problem"), what="the API's refusal under Expectations")  # fmt: skip
    assert call(stack, "GET", f"/api/jobs/{job['id']}")["expectations"] == stored  # nothing written


def _hook(stack: Stack, trigger_id: int, secret: str) -> int:
    request = urllib.request.Request(f"{stack.base}/hooks/{trigger_id}", data=b"{}", method="POST")
    request.add_header("Authorization", f"Bearer {secret}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_trigger_urls_under_the_form_show_the_secret_once_and_revoke(browser: Any, stack: Stack) -> None:
    driver = browser
    job = call(stack, "POST", "/api/jobs", {"name": "b-hooks", "cron_expression": "@yearly", "payload": OK})
    _open_edit(driver, stack, job)
    assert "No trigger URLs." in text(driver, "#triggers-list")
    name = find(driver, "#trigger-name")
    name.clear()
    name.send_keys("deploy")
    find(driver, "#trigger-create").click()
    secret = str(wait(driver, lambda d: find(d, "#trigger-secret-value").get_attribute("value"), what="the secret"))
    [made] = call(stack, "GET", f"/api/jobs/{job['id']}/triggers")["items"]
    assert made["name"] == "deploy" and not made["signed"]
    wait(driver, lambda d: f"/hooks/{made['id']}" in text(d, "#triggers-list"), what="the trigger listed")
    assert secret not in text(driver, "#triggers-list")
    assert [w["url"].split("/api", 1)[1] for w in _writes(driver)] == [f"/jobs/{job['id']}/triggers"]  # no Save
    assert _hook(stack, made["id"], secret) == 202

    _open_edit(driver, stack, job)  # the page again: the secret is gone for good
    assert not find_all(driver, "#trigger-secret-value") and secret not in driver.page_source
    driver.execute_script("window.confirm = () => true")
    find(driver, f"#revoke-{made['id']}").click()
    wait(driver, lambda d: "revoked" in text(d, "#triggers-list"), what="the trigger revoked")
    assert _hook(stack, made["id"], secret) == 404
    assert call(stack, "GET", f"/api/jobs/{job['id']}")["revision"] == 1  # the job itself untouched
