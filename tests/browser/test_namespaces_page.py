"""The console's namespace switcher (issue 41, item 1): the jobs list shows one namespace's jobs,
another is chosen from the switcher, and the new-job form creates its job in the namespace chosen."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, go, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def test_the_jobs_list_switches_namespace(browser: Any, stack: Stack) -> None:
    from selenium.webdriver.support.ui import Select

    driver = browser
    call(stack, "PUT", "/api/namespaces/team-b")
    body = {"cron_expression": "@yearly", "payload": {"action": "x"}}
    call(stack, "POST", "/api/jobs", {"name": "ns-default-job", **body})
    call(stack, "POST", "/api/jobs?namespace=team-b", {"name": "ns-b-job", **body})

    go(driver, stack, "#/jobs")
    wait(driver, lambda d: "ns-default-job" in text(d, "#jobs"), what="default's jobs")
    assert "ns-b-job" not in text(driver, "#jobs")
    wait(driver, lambda d: "team-b" in text(d, "#namespace-filter"), what="the namespaces offered")
    Select(find(driver, "#namespace-filter")).select_by_value("team-b")
    wait(driver, lambda d: "ns-b-job" in text(d, "#jobs"), what="team-b's jobs")
    assert "ns-default-job" not in text(driver, "#jobs")

    go(driver, stack, "#/jobs")  # the choice stays for this tab
    wait(driver, lambda d: "ns-b-job" in text(d, "#jobs"), what="team-b's jobs again")
    assert find(driver, "#namespace-filter").get_attribute("value") == "team-b"
    Select(find(driver, "#namespace-filter")).select_by_value("default")
    wait(driver, lambda d: "ns-default-job" in text(d, "#jobs"), what="default's jobs again")
