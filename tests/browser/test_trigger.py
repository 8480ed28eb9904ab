"""'Run now…' with inputs on the job page (issue 24, item 5): a JSON editor prefilled with the job's
payload, its secrets locked; only what changed is sent as overrides; an optional logical date."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import LAPTOP, call, find, go, screenshot, screenshot_artifact, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(90)]

SECRET = "K-SECRET-never-shown"


def _edit(driver: Any, css: str, value: str) -> None:
    field = find(driver, css)
    driver.execute_script("arguments[0].value = arguments[1]", field, value)


def _open(driver: Any) -> dict[str, Any]:
    wait(driver, lambda d: find(d, "#run-with-inputs"), what="the job page").click()
    editor = wait(driver, lambda d: find(d, "#trigger-dialog[open] #trigger-payload"), what="the dialog")
    return dict(json.loads(editor.get_attribute("value")))


def test_run_now_with_inputs_from_the_job_page(browser: Any, stack: Stack) -> None:
    driver = browser
    payload = {"action": "browser.echo", "target": "users", "api_key": SECRET}
    job = call(stack, "POST", "/api/jobs", {"name": "inputs", "cron_expression": "@yearly", "payload": payload})
    go(driver, stack, f"#/jobs/{job['id']}")
    shown = _open(driver)
    assert shown == {**payload, "api_key": "***"} and SECRET not in driver.page_source
    assert "api_key" in text(driver, "#trigger-locked")

    _edit(driver, "#trigger-payload", json.dumps({**shown, "target": "orders"}, indent=2))
    screenshot(driver, "console-run-now", LAPTOP)  # docs/run-now.md

    # A secret stays locked: refused in the page, nothing sent.
    _edit(driver, "#trigger-payload", json.dumps({**shown, "api_key": "mine"}))
    find(driver, "#trigger-run").click()
    wait(driver, lambda d: "api_key is a secret" in text(d, "#trigger-error"), what="the locked secret")
    # A logical date that is no tick of the job: the API's 422, shown where it is.
    _edit(driver, "#trigger-payload", json.dumps({**shown, "target": "orders"}))
    find(driver, "#trigger-at").send_keys("2026-01-01T00:00:00Z")
    find(driver, "#trigger-run").click()
    wait(driver, lambda d: "$.scheduled_for" in text(d, "#trigger-error"), what="the API's refusal")
    assert find(driver, "#trigger-at").get_attribute("aria-invalid") == "true"
    screenshot_artifact(driver, "trigger-dialog")
    find(driver, "#trigger-at").clear()
    find(driver, "#trigger-run").click()
    wait(driver, lambda d: not find_dialog(d), what="the dialog to close")

    runs = call(stack, "GET", f"/api/jobs/{job['id']}/runs")["items"]
    assert len(runs) == 1
    run = call(stack, "GET", f"/api/runs/{runs[0]['id']}")
    assert run["inputs"] == {"target": "orders"}  # only what changed
    go(driver, stack, f"#/runs/{run['id']}")
    wait(driver, lambda d: "completed" in text(d, ".title"), timeout=30, what="the run to complete")
    assert json.loads(text(driver, "#inputs")) == {"target": "orders"}
    result = json.loads(call(stack, "GET", f"/api/runs/{run['id']}")["result"])
    assert result["payload"] == {**payload, "target": "orders", "api_key": "***"}  # scrubbed from the result

    # The same tick again, with its logical date and the job's own payload: its next attempt.
    go(driver, stack, f"#/jobs/{job['id']}")
    _open(driver)
    find(driver, "#trigger-at").send_keys(run["scheduled_for"])
    find(driver, "#trigger-run").click()
    wait(driver, lambda d: not find_dialog(d), what="the dialog to close")
    again = call(stack, "GET", f"/api/jobs/{job['id']}/runs")["items"][0]
    assert (again["scheduled_for"], again["attempt"]) == (run["scheduled_for"], 2)
    assert call(stack, "GET", f"/api/runs/{again['id']}")["inputs"] is None


def find_dialog(driver: Any) -> bool:
    return bool(driver.execute_script("return !!document.querySelector('#trigger-dialog[open]')"))
