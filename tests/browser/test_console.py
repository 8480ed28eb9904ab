"""The web console in a real headless Chromium against a real `cronos dev` stack.

One stack and one browser for the module; the tests run in file order (the last one creates
a token, which ends protected mode). The screenshots in docs/img/ come from here.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest

from tests.browser.conftest import ARTIFACTS, Stack

T = TypeVar("T")
# The README's screenshots are rewritten only on request (CRONOS_UPDATE_SCREENSHOTS=1), so a test
# run leaves the checkout clean; otherwise they go beside the other artifacts for a look.
_REPO = Path(__file__).resolve().parents[2]
IMAGES = (
    _REPO / "docs" / "img" if os.environ.get("CRONOS_UPDATE_SCREENSHOTS") == "1" else _REPO / "artifacts" / "browser"
)
LAPTOP, PHONE = (1280, 860), (390, 844)

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(90)]


def call(stack: Stack, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(stack.base + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as resp:
        raw = resp.read()
        return json.loads(raw) if raw else None


def wait(driver: Any, probe: Callable[[Any], T], timeout: float = 20, what: str = "the page") -> T:
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def safe(d: Any) -> T | bool:
        try:
            return probe(d)
        except (StaleElementReferenceException, WebDriverException):
            return False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(safe)  # type: ignore[no-any-return]
    except TimeoutException:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "failure.png"))
        raise AssertionError(f"timed out waiting for {what}; page text: {text(driver, 'main')[:1500]}") from None


def text(driver: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def find(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css)


def find_all(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def go(driver: Any, stack: Stack, hash_: str) -> None:
    """Open a page afresh (the same URL again would only keep the page as it is)."""
    url = f"{stack.base}/{hash_}"
    if driver.current_url == url:
        driver.refresh()
    else:
        driver.get(url)


# The page redraws its chart at the window's width (api/ui/chart.js) on a resize.
_CHART_FITS = """
const chart = document.querySelector('.chart svg');
const width = Math.round(Math.min(1100, Math.max(320, window.innerWidth - 48)));
return !chart || chart.getAttribute('viewBox') === `0 0 ${width} 200`;
"""


def screenshot(driver: Any, name: str, size: tuple[int, int]) -> None:
    """A PNG of the whole page at this window width (IMAGES/<name>.png)."""
    driver.set_window_size(*size)
    wait(driver, lambda d: d.execute_script(_CHART_FITS), what="the chart redrawn at this width")
    # The window's height is the page's plus the browser's own frame (outer minus inner height).
    height = driver.execute_script(
        "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight"
    )
    driver.set_window_size(size[0], min(max(size[1], int(height)), 2400))
    IMAGES.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(IMAGES / f"{name}.png"))
    driver.set_window_size(*LAPTOP)


def screenshot_artifact(driver: Any, name: str) -> None:
    """A picture for people reviewing a run (artifacts/browser/), not for the README."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def run_states(driver: Any) -> list[str]:
    return [cell.text for cell in find_all(driver, "#runs td[data-label='State']")]


def test_the_page_is_served_with_a_strict_policy_and_no_inline_script(stack: Stack) -> None:
    with urllib.request.urlopen(stack.base + "/", timeout=10) as resp:
        html = resp.read().decode()
        policy = resp.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy and "default-src 'none'" in policy
    assert '<script type="module" src="/ui/app.js"></script>' in html and "<script>" not in html
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(stack.base + "/ui/../api/app.py", timeout=10)
    missing.value.close()
    assert missing.value.code == 404


def test_create_a_job_through_the_form_with_live_preview_and_watch_its_runs(browser: Any, stack: Stack) -> None:
    driver = browser
    go(driver, stack, "#/new")
    name = wait(driver, lambda d: find(d, "#name"), what="the form")
    name.send_keys("nightly-every-second")
    cron = find(driver, "#cron_expression")
    cron.clear()
    cron.send_keys("61 * * * *")
    wait(driver, lambda d: "out of range" in text(d, "#cron_expression-problem"), what="the schedule's problem")
    assert find(driver, "#cron_expression").get_attribute("aria-invalid") == "true"
    cron.clear()
    cron.send_keys("* * * * * *")
    wait(driver, lambda d: text(d, "#description") == "every second", what="the live description")
    assert len(find_all(driver, "#preview li")) == 5
    payload = find(driver, "#payload")
    payload.clear()
    payload.send_keys('{"action": "browser.ok"')
    wait(driver, lambda d: "not valid JSON" in text(d, "#payload-problem"), what="the payload's problem")
    payload.send_keys("}")
    wait(driver, lambda d: text(d, "#payload-problem") == "", what="the payload accepted")
    find(driver, "#save").click()

    wait(driver, lambda d: "#/jobs/" in d.current_url and text(d, "h1") == "nightly-every-second", what="the job page")
    wait(driver, lambda d: text(d, ".lead") == "every second" and len(find_all(d, ".fires li")) == 10,
         what="the words and the next 10 fire times")  # fmt: skip
    # Runs appear without a reload (polling), and the chart draws once two have started.
    wait(driver, lambda d: run_states(d).count("completed") >= 6, timeout=30, what="completed runs")
    wait(driver, lambda d: find_all(d, "#chart svg path"), what="the chart")


def test_the_job_page_lists_its_ticks_with_their_outcomes(browser: Any, stack: Stack) -> None:
    driver = browser  # still on the every-second job's page
    wait(driver, lambda d: [c.text for c in find_all(d, "#ticks td[data-label='Outcome']")].count("ran") >= 3,
         timeout=30, what="ticks that ran")  # fmt: skip
    reasons = [c.text for c in find_all(driver, "#ticks td[data-label='Reason']")]
    assert "before the job existed" not in reasons, reasons  # the window reaches back past the creation
    assert all(a.get_attribute("href").rsplit("/", 2)[-2] == "runs" for a in find_all(driver, "#ticks td a"))


def test_pause_and_trigger_from_the_job_page(browser: Any, stack: Stack) -> None:
    driver = browser
    wait(driver, lambda d: find(d, "#toggle").text == "Pause", what="the pause button")
    find(driver, "#toggle").click()
    wait(driver, lambda d: find(d, "#toggle").text == "Resume" and "paused" in text(d, ".title"), what="paused")
    job_id = int(driver.current_url.rsplit("/", 1)[1])
    assert call(stack, "GET", f"/api/jobs/{job_id}")["status"] == "paused"
    find(driver, "#trigger").click()
    wait(
        driver,
        lambda d: any(c.text == "manual" for c in find_all(d, "#runs td[data-label='Trigger']")),
        what="the manual run",
    )
    # Newest tick first: the manual run comes after ticks written ahead (skipped: the job is paused).
    triggers = [c.text for c in find_all(driver, "#runs td[data-label='Trigger']")]
    assert "manual" in triggers[:3], triggers
    screenshot(driver, "console-job", LAPTOP)
    screenshot(driver, "console-job-phone", PHONE)


def test_a_failed_runs_traceback(browser: Any, stack: Stack) -> None:
    driver = browser
    job = call(stack, "POST", "/api/jobs", {
        "name": "breaks", "cron_expression": "@yearly", "payload": {"action": "browser.fail"}, "max_retries": 1,
        "retry_backoff_s": 0.5,
    })  # fmt: skip
    go(driver, stack, f"#/jobs/{job['id']}")
    wait(driver, lambda d: find(d, "#trigger"), what="the job page").click()
    wait(driver, lambda d: run_states(d).count("failed") == 2, timeout=30, what="two failed attempts")
    find_all(driver, "#runs td[data-label='Run'] a")[-1].click()  # the first attempt
    traceback = wait(driver, lambda d: find(d, "#traceback"), what="the traceback")
    assert "RuntimeError: browser test failure: the disk is full" in traceback.text
    assert "Traceback (most recent call last)" in traceback.text
    attempts = [c.text for c in find_all(driver, "td[data-label='Attempt']")]
    assert attempts == ["1", "2"], attempts
    screenshot_artifact(driver, "run")


def test_edit_keeps_a_secret_it_shows_as_stars(browser: Any, stack: Stack) -> None:
    driver = browser
    secret = "Bearer s3cr3t-value-never-shown"
    job = call(stack, "POST", "/api/jobs", {
        "name": "hook", "cron_expression": "@daily", "kind": "http", "status": "paused",
        "payload": {"url": "https://hooks.example.com/cronos", "headers": {"Authorization": secret}},
    })  # fmt: skip
    go(driver, stack, f"#/jobs/{job['id']}/edit")
    payload = wait(driver, lambda d: find(d, "#payload"), what="the edit form")
    assert '"Authorization": "***"' in payload.get_attribute("value")
    assert secret not in driver.page_source
    cron = find(driver, "#cron_expression")
    cron.clear()
    cron.send_keys("*/15 9-17 * * *")
    wait(driver, lambda d: text(d, "#description") == "every 15 minutes from 09:00 to 17:59", what="the new words")
    screenshot_artifact(driver, "form")
    find(driver, "#save").click()
    wait(
        driver,
        lambda d: text(d, "h1") == "hook" and text(d, ".lead") == "every 15 minutes from 09:00 to 17:59",
        what="the saved job's page",
    )
    assert secret not in driver.page_source and "***" in text(driver, ".payload")
    stored = asyncio.run(_stored_payload(stack, job["id"]))
    assert stored["headers"]["Authorization"] == secret  # "***" sent back kept the stored value


async def _stored_payload(stack: Stack, job_id: int) -> dict[str, Any]:
    conn = await asyncpg.connect(stack.database_url)
    try:
        return dict(json.loads(await conn.fetchval("SELECT payload::text FROM jobs WHERE id = $1", job_id)))
    finally:
        await conn.close()


def test_a_bad_field_on_save_is_marked_where_it_is(browser: Any, stack: Stack) -> None:
    driver = browser
    go(driver, stack, "#/new")
    wait(driver, lambda d: find(d, "#name"), what="the form").send_keys("breaks")  # taken: a 409
    find(driver, "#save").click()
    wait(driver, lambda d: "already exists" in text(d, "#form-problem"), what="the conflict")
    find(driver, "#name").send_keys(" too")
    find(driver, "details summary").click()
    find(driver, "#timeout_s").clear()
    find(driver, "#timeout_s").send_keys("-1")
    find(driver, "details summary").click()  # closed again: the refusal opens it
    find(driver, "#save").click()
    wait(driver, lambda d: "timeout_s" in text(d, "#timeout_s-problem"), what="the field's problem")
    assert driver.switch_to.active_element == find(driver, "#timeout_s")


def test_the_cluster_page_names_the_leader(browser: Any, stack: Stack) -> None:
    driver = browser
    go(driver, stack, "#/cluster")
    wait(driver, lambda d: text(d, "#leader") == stack.node_id, what="the leader")
    roles = {c.text for c in find_all(driver, "td[data-label='Role']")}
    assert {"dispatcher", "executor"} <= roles, roles
    screenshot_artifact(driver, "cluster")


def test_the_jobs_page_searches_filters_and_renders_names_as_text(browser: Any, stack: Stack) -> None:
    driver = browser
    hostile = "<img src=x onerror=\"document.title='pwned'\">"
    for name, cron, zone in (
        ("sync-db-indexes", "*/5 * * * *", "UTC"),
        ("weekly-report", "30 2 * * 1", "Europe/Berlin"),
        ("billing-export", "0 9-17 * * MON-FRI", "America/New_York"),
        (hostile, "@daily", "Asia/Tokyo"),
    ):
        call(stack, "POST", "/api/jobs", {"name": name, "cron_expression": cron, "timezone": zone,
                                          "payload": {"action": "browser.ok"}})  # fmt: skip
    go(driver, stack, "#/jobs")
    wait(driver, lambda d: len(find_all(d, "#jobs tbody tr")) == 7, what="seven jobs")
    # Read in one go inside `wait`: the page redraws its rows (polling, verdict badges) meanwhile.
    rows = wait(driver, lambda d: [r.text for r in find_all(d, "#jobs tbody tr")], what="the rows' text")
    names = wait(driver, lambda d: [c.text for c in find_all(d, "td[data-label='Name']")], what="the names")
    assert hostile in names and not find_all(driver, "#jobs img") and driver.title == "Cronos"
    row = next(r for r in rows if "weekly-report" in r)
    assert "at 02:30 on Monday" in row and "Europe/Berlin" in row
    nightly = next(r for r in rows if "nightly-every-second" in r)
    assert "completed" in nightly or "skipped" in nightly
    screenshot(driver, "console-jobs", LAPTOP)
    screenshot(driver, "console-jobs-phone", PHONE)

    find(driver, "#search").send_keys("REPORT")
    wait(driver, lambda d: [c.text for c in find_all(d, "td[data-label='Name']")] == ["weekly-report"], what="search")
    find(driver, "#search").clear()
    find(driver, "#search").send_keys(" ")  # an input event with an empty search
    from selenium.webdriver.support.ui import Select

    Select(find(driver, "#status-filter")).select_by_value("paused")
    wait(driver, lambda d: [c.text for c in find_all(d, "td[data-label='Name']")] == ["nightly-every-second", "hook"],
         what="the status filter")  # fmt: skip


def test_the_keyboard_reaches_a_job_and_its_actions(browser: Any, stack: Stack) -> None:
    from selenium.webdriver.common.keys import Keys

    driver = browser
    go(driver, stack, "#/jobs")
    wait(driver, lambda d: len(find_all(d, "#jobs tbody tr")) == 7, what="the jobs")
    find(driver, "#search").click()
    driver.switch_to.active_element.send_keys(Keys.TAB)  # the status filter
    assert driver.switch_to.active_element.get_attribute("id") == "status-filter"
    driver.switch_to.active_element.send_keys(Keys.TAB)  # the label selector
    assert driver.switch_to.active_element.get_attribute("id") == "label-filter"
    driver.switch_to.active_element.send_keys(Keys.TAB)  # the first job's link
    assert driver.switch_to.active_element.text == "nightly-every-second"
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    wait(driver, lambda d: text(d, "h1") == "nightly-every-second", what="the job page, by keyboard")
    toggle = wait(driver, lambda d: find(d, "#toggle"), what="the actions")
    toggle.send_keys(Keys.ENTER)  # a focused button answers Enter: paused -> resumed
    wait(driver, lambda d: find(d, "#toggle").text == "Pause", what="resumed by keyboard")
    find(driver, "#toggle").send_keys(Keys.SPACE)
    wait(driver, lambda d: find(d, "#toggle").text == "Resume", what="paused again by keyboard")


def test_no_script_error_and_no_policy_violation_on_any_page(browser: Any, stack: Stack) -> None:
    driver = browser
    for page in ("#/jobs", "#/jobs/1", "#/jobs/1/edit", "#/new", "#/runs/1", "#/cluster"):
        go(driver, stack, page)
        wait(driver, lambda d: "Loading" not in text(d, "main"), what=page)
    # Refused API calls (the tests' 422s and 409s) are logged as failed loads; anything else is a bug.
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert [m for m in errors if "Failed to load resource" not in m] == []


def test_with_a_token_the_page_asks_once_and_sends_it_as_a_bearer_header(browser: Any, stack: Stack) -> None:
    driver = browser
    token = call(stack, "POST", "/api/tokens", {"name": "console", "scopes": ["read", "write"]})["token"]
    # Protected mode is over: the page itself still loads (it holds no data), the API asks.
    go(driver, stack, "#/jobs")
    driver.execute_script("sessionStorage.clear()")
    driver.refresh()
    field = wait(driver, lambda d: d.find_element("id", "token-input").is_displayed() and d.find_element("id",
                 "token-input"), what="the token dialog")  # fmt: skip
    field.send_keys(token)
    find(driver, "#token-form button[type='submit']").click()
    wait(driver, lambda d: len(find_all(d, "#jobs tbody tr")) == 7, what="the jobs, with the token")
    assert driver.execute_script("return sessionStorage.getItem('cronos.token')") == token
    assert driver.get_cookies() == []
    go(driver, stack, "#/cluster")  # another page: no second question
    wait(driver, lambda d: text(d, "#leader") == stack.node_id, what="the cluster page with the token")
    assert not find(driver, "#token-dialog").get_attribute("open")


def test_delete_asks_first(browser: Any, stack: Stack) -> None:
    driver = browser
    job = next(j for j in call(stack, "GET", "/api/jobs", token=_token(driver))["items"] if j["name"] == "hook")
    go(driver, stack, f"#/jobs/{job['id']}")
    wait(driver, lambda d: find(d, "#delete"), what="the job page").click()
    assert 'Delete job "hook"' in driver.switch_to.alert.text
    driver.switch_to.alert.dismiss()  # no: nothing happens
    assert text(driver, "h1") == "hook"
    find(driver, "#delete").click()
    driver.switch_to.alert.accept()
    wait(driver, lambda d: d.current_url.endswith("#/jobs") and len(find_all(d, "#jobs tbody tr")) == 6,
         what="the jobs without it")  # fmt: skip
    assert "hook" not in [c.text for c in find_all(driver, "td[data-label='Name']")]


def _token(driver: Any) -> str:
    return str(driver.execute_script("return sessionStorage.getItem('cronos.token')"))


def test_the_job_page_shows_the_verdict_with_its_reason_and_the_list_its_badge(browser: Any, stack: Stack) -> None:
    driver = browser  # last: a token exists now (the page holds it)
    token = _token(driver)
    job = call(stack, "POST", "/api/jobs", {
        "name": "judged", "cron_expression": "@yearly", "payload": {"action": "browser.fail"},
        "expectations": {"finish_within_s": 60},
    }, token=token)  # fmt: skip
    call(stack, "POST", f"/api/jobs/{job['id']}/trigger", token=token)
    go(driver, stack, f"#/jobs/{job['id']}")
    # The leader's evaluator judges every CRONOS_HEALTH_INTERVAL_S (5 s); the page polls.
    wait(driver, lambda d: text(d, "#verdict") == "failing", timeout=30, what="the verdict")
    assert text(driver, "#verdict-reason") == "the last run failed"
    assert text(driver, "#expected") == "finishes within 60 s"
    screenshot_artifact(driver, "job-health")
    go(driver, stack, "#/jobs")
    wait(driver, lambda d: "failing" in [c.text for c in find_all(d, "#jobs td[data-label='Health']")],
         what="the verdict badge in the list")  # fmt: skip


NAV_PAGES = ("jobs", "runs", "new", "calendars", "groups", "cluster", "channels", "fleet")


@pytest.mark.parametrize("page", NAV_PAGES)
def test_every_page_reads_as_text_with_no_ring_around_it(browser: Any, stack: Stack, page: str) -> None:
    # Markdown's backticks showed as such on the Groups page, and the main region's focus ring framed
    # every headless screenshot (issue 37).
    driver = browser
    go(driver, stack, f"#/{page}")
    wait(driver, lambda d: find(d, f"a[data-nav='{page}']").get_attribute("aria-current") == "page"
         and "Loading" not in text(d, "main"), what=f"the {page} page")  # fmt: skip
    # As the console focuses main on navigation (api/ui/app.js), with no pointer used.
    focus = "const m = document.getElementById('main'); m.focus(); return getComputedStyle(m).outlineStyle"
    ring = driver.execute_script(focus)
    assert ring == "none", ring
    assert "`" not in text(driver, "main"), text(driver, "main")
