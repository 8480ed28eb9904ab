"""The console's job form and chains (issue 40, item 5): "After its parents" sets a child's edges
(`parent:when`) and its join (timeout, run or skip at the timeout). A chained job saved untouched
writes nothing; edges and a join set in the form are sent as `chain` alone and stored; bad edges
are marked on the group without a request; the API's 422 on `$.chain.on` is shown there too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, text, wait
from tests.browser.test_form import OK, _open_edit, _save, _screenshot, _writes

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def _type(driver: Any, selector: str, value: str) -> None:
    box = find(driver, selector)
    box.clear()
    box.send_keys(value)


def test_edges_and_a_join_in_the_form(browser: Any, stack: Stack) -> None:
    from selenium.webdriver.support.ui import Select

    driver = browser
    a = call(stack, "POST", "/api/jobs", {"name": "c-extract-a", "cron_expression": "@never", "payload": OK})
    b = call(stack, "POST", "/api/jobs", {"name": "c-extract-b", "cron_expression": "@never", "payload": OK})
    chained = {"on": {str(a["id"]): "failed"}, "join": {"timeout_s": 90.0, "on_timeout": "run"}}
    child = call(stack, "POST", "/api/jobs", {"name": "c-load", "cron_expression": "@never", "payload": OK,
                                              "parents": [a["id"], b["id"]], "chain": chained})  # fmt: skip
    _open_edit(driver, stack, child)
    assert find(driver, "#chain_on").get_attribute("value") == f"{a['id']}:failed"
    assert find(driver, "#chain_join").is_selected() and find(driver, "#chain_timeout_s").get_attribute("value") == "90"
    _screenshot(driver, "form-chain")
    find(driver, "#save").click()
    wait(driver, lambda d: text(d, "#status") == "Nothing changed", what="an untouched save")
    assert _writes(driver) == []

    plain = call(stack, "POST", "/api/jobs", {"name": "c-page", "cron_expression": "@never", "payload": OK,
                                              "parents": [a["id"], b["id"]]})  # fmt: skip
    _open_edit(driver, stack, plain)
    find(driver, "#chain summary").click()
    _type(driver, "#chain_on", f"{a['id']}:sometimes")
    find(driver, "#save").click()
    wait(driver, lambda d: "parent:when" in text(d, "#chain-problem"), what="bad edges marked")
    assert _writes(driver) == []
    _type(driver, "#chain_on", "999:failed")
    find(driver, "#save").click()
    wait(driver, lambda d: "not one of the job's parents" in text(d, "#chain-problem"), what="the API's 422 shown")
    _type(driver, "#chain_on", f"{a['id']}:failed, {b['id']}:ended")
    find(driver, "#chain_join").click()
    _type(driver, "#chain_timeout_s", "30")
    Select(find(driver, "#chain_on_timeout")).select_by_value("run")
    driver.execute_script("window.sent = []")
    _save(driver, stack, plain, "Saved: chain")
    expected = {"on": {str(a["id"]): "failed", str(b["id"]): "ended"}, "join": {"timeout_s": 30, "on_timeout": "run"}}
    assert [json.loads(w["body"]) for w in _writes(driver)] == [{"chain": expected}]
    assert call(stack, "GET", f"/api/jobs/{plain['id']}")["chain"] == expected
