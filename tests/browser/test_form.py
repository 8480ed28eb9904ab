"""The console's edit form changes exactly what you changed (issue 23, item 3).

Every shape of job the API takes is created through the API, opened in Edit and saved untouched:
the page sends no write at all (a spy on `fetch` sees every request it makes), the job keeps its
revision and every field. One edit of one field sends that field alone, and its revision holds it
alone. On the form before this, a buffer_all job saved untouched became forbid and a run_at
one-off could not be saved (422 on $.cron_expression).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cronos.models import JOB_WRITABLE
from tests.browser.conftest import ARTIFACTS, Stack
from tests.browser.test_console import call, find, go, text, wait
from tests.waiting import block_until

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]

SECRET = "Bearer s3cr3t-never-shown"
OK = {"action": "browser.ok"}
# Every request the page makes from here on, with its method and body (the page's own fetch still runs).
_SPY = """
window.sent = [];
if (!window.spied) {
  const real = window.fetch;
  window.fetch = (url, init) => {
    window.sent.push({url: String(url), method: init?.method ?? "GET", body: init?.body ?? null});
    return real(url, init);
  };
  window.spied = true;
}
"""

# Labels whose control is not theirs alone (an id the page uses twice: the form's status was once).
_LABELS = """
return [...document.querySelectorAll('#job-form label')]
  .filter((l) => document.querySelectorAll('#' + CSS.escape(l.htmlFor)).length !== 1 || !l.control)
  .map((l) => l.htmlFor);
"""


def _shapes(parent: int, other: int) -> list[dict[str, Any]]:
    """One job of every kind and shape the form must carry through untouched."""
    p, o = str(parent), str(other)
    return [
        {"name": "f-task-forbid", "cron_expression": "*/5 * * * *", "payload": OK},
        {"name": "f-buffer-all", "cron_expression": "@yearly", "payload": OK, "concurrency_policy": "buffer_all"},
        {"name": "f-buffer-one", "cron_expression": "@yearly", "payload": OK, "concurrency_policy": "buffer_one",
         "misfire_policy": "run_all", "misfire_grace_s": 7.5},
        {"name": "f-replace", "cron_expression": "0 9 * * MON-FRI", "timezone": "Europe/Berlin", "payload": OK,
         "concurrency_policy": "replace", "status": "paused"},
        {"name": "f-allow", "cron_expression": "@yearly", "payload": OK, "concurrency_policy": "allow",
         "misfire_policy": "skip", "timeout_s": 12.5, "max_retries": 3, "retry_backoff_s": 0.5},
        {"name": "f-one-off", "run_at": "2031-06-01T12:30:00+02:00", "payload": OK},
        {"name": "f-http", "cron_expression": "@daily", "kind": "http", "status": "paused",
         "payload": {"url": "https://hooks.example.com/cronos?token=abc&a=1", "method": "POST",
                     "headers": {"Authorization": SECRET, "X-Plain": "shown"}}},
        {"name": "f-shell", "cron_expression": "@yearly", "kind": "shell", "status": "paused",
         "payload": {"argv": ["echo", "hello"], "env": {"API_KEY": "k-123", "MODE": "x"}}},
        {"name": "f-complex", "cron_expression": "*/10 8-18 * * *", "timezone": "America/New_York", "payload": OK,
         "start_at": "2030-01-01T00:00:00Z", "end_at": "2030-12-31T23:00:00-05:00", "max_runs": 10,
         "catchup_max_per_s": 2.5, "parents": [parent], "queue": "reports", "jitter_s": 3,
         "concurrency_policy": "buffer_one"},
        {"name": "f-never-child", "cron_expression": "@never", "payload": OK, "parents": [parent]},
        {"name": "f-breaker", "cron_expression": "@hourly", "payload": OK,
         "expectations": {"start_within_s": 30, "breaker": {"failures": 0, "canary_every": 4}}},
        {"name": "f-managed", "cron_expression": "@hourly", "payload": OK,
         "managed_by": {"tool": "cronos-apply", "secrets_digest": None}},
        # Issue 40's fields, alone and together, on each kind.
        {"name": "f-hosts", "cron_expression": "@hourly", "payload": OK, "concurrency_policy": "allow",
         "hosts": {"count": 2, "label": "rack=a"}},
        {"name": "f-hosts-all-interval", "every": "90m", "anchor": "2026-01-01T00:15:00+01:00", "payload": OK,
         "concurrency_policy": "allow", "hosts": {}},
        {"name": "f-edges", "cron_expression": "@never", "payload": OK, "parents": [parent, other],
         "chain": {"on": {p: "failed", o: "ended"}}},
        {"name": "f-join", "cron_expression": "@never", "payload": OK, "parents": [parent, other],
         "chain": {"on": {o: "ended"}, "join": {"timeout_s": 90.5, "on_timeout": "run"}}},
        {"name": "f-schedules", "cron_expression": "0 9 * * 1-5", "timezone": "Europe/Berlin", "payload": OK,
         "schedules": [{"cron": "0 8 * * 6", "timezone": "Europe/Paris"}, {"every": "36h"},
                       {"every": "1h30m", "anchor": "2026-01-01T00:15:00+01:00"}, {"cron": "H 3 * * *"}]},
        {"name": "f-interval-schedules", "every": "2h", "payload": OK, "schedules": [{"cron": "30 6 * * *"}]},
        {"name": "f-breaker-failures", "cron_expression": "@hourly", "payload": OK,
         "expectations": {"breaker": {"failures": 3}}},
        {"name": "f-breaker-empty", "cron_expression": "@hourly", "payload": OK, "expectations": {"breaker": {}}},
        {"name": "f-expectations-empty", "cron_expression": "@hourly", "payload": OK, "expectations": {}},
        {"name": "f-chain-empty", "cron_expression": "@hourly", "payload": OK, "parents": [parent], "chain": {}},
        {"name": "f-http-all", "cron_expression": "@daily", "kind": "http", "status": "paused",
         "payload": {"url": "https://hooks.example.com/x", "method": "GET"}, "concurrency_policy": "allow",
         "hosts": {"label": "zone=eu"}, "parents": [parent], "chain": {"on": {p: "ended"}},
         "schedules": [{"cron": "0 12 * * *"}], "expectations": {"breaker": {"failures": 2, "canary_every": 3}}},
        {"name": "f-shell-join", "cron_expression": "@never", "kind": "shell", "status": "paused",
         "payload": {"argv": ["true"]}, "parents": [parent, other], "chain": {"join": {}},
         "schedules": [{"every": "1d"}], "expectations": {"breaker": {"failures": 0}}},
    ]  # fmt: skip


def _kept(job: dict[str, Any]) -> dict[str, Any]:
    """What a write would change: every writable field, the revision and the update time."""
    return {k: job[k] for k in (*JOB_WRITABLE, "revision", "updated_at")}


def _open_edit(driver: Any, stack: Stack, job: dict[str, Any]) -> None:
    go(driver, stack, f"#/jobs/{job['id']}/edit")
    wait(driver, lambda d: text(d, "h1") == f"Edit {job['name']}" and find(d, "#save"), what=f"{job['name']}'s form")
    wait(driver, lambda d: text(d, "#preview") != "", what="the schedule's preview")
    driver.execute_script(_SPY)


def _writes(driver: Any) -> list[dict[str, Any]]:
    sent = driver.execute_script("return window.sent")
    return [r for r in sent if r["method"] != "GET"]


def _save(driver: Any, stack: Stack, job: dict[str, Any], flashed: str) -> None:
    find(driver, "#save").click()
    wait(driver, lambda d: d.current_url.endswith(f"#/jobs/{job['id']}") and flashed in text(d, "#status"),
         what=f"{job['name']} saved: {flashed!r}")  # fmt: skip


def test_every_shape_of_job_saved_untouched_writes_nothing(browser: Any, stack: Stack) -> None:
    driver = browser
    parent = call(stack, "POST", "/api/jobs", {"name": "f-parent", "cron_expression": "@yearly", "payload": OK})
    other = call(stack, "POST", "/api/jobs", {"name": "f-other", "cron_expression": "@yearly", "payload": OK})
    for body in _shapes(parent["id"], other["id"]):
        job = call(stack, "POST", "/api/jobs", body)
        before = _kept(call(stack, "GET", f"/api/jobs/{job['id']}"))
        _open_edit(driver, stack, job)
        if body.get("managed_by"):
            assert "cronos apply" in text(driver, "#managed-by") and "reverts" in text(driver, "#managed-by")
            _screenshot(driver, "form-managed")
        else:
            assert not driver.find_elements("id", "managed-by")
        if job["name"] == "f-http":
            shown = find(driver, "#payload").get_attribute("value")
            assert SECRET not in driver.page_source and '"Authorization": "***"' in shown
        if job["name"] in ("f-complex", "f-http-all"):
            assert driver.execute_script(_LABELS) == []
            _screenshot(driver, job["name"].replace("f-", "form-"))
        find(driver, "#save").click()
        page = f"#/jobs/{job['id']}"
        wait(driver, lambda d, page=page: d.current_url.endswith(page), what=f"{job['name']} saved")
        # Read while it shows: the status line clears itself 4 s later (a loaded machine's API calls
        # below can take that long).
        assert text(driver, "#status") == "Nothing changed", job["name"]
        if job["name"] == "f-http-all":  # the job page says where it runs and after what
            wait(driver, lambda d: find(d, "#def-hosts"), what="the definition")
            assert text(driver, "#def-hosts") == "every executor of its queue labelled zone=eu, a run each"
            assert text(driver, "#def-parents") == f"after {parent['id']} (ended)"
            _screenshot(driver, "job-http-all")
        if job["name"] == "f-join":
            wait(driver, lambda d: find(d, "#def-parents"), what="the definition")
            edges = f"after {parent['id']} (completed), {other['id']} (ended)"
            assert text(driver, "#def-parents") == f"{edges}; joined: once per tick, waits 90.5 s, then runs"
        revisions = call(stack, "GET", f"/api/jobs/{job['id']}/revisions")["items"]
        assert [(r["number"], r["changes"]) for r in revisions] == [(1, revisions[-1]["changes"])], job["name"]
        assert _kept(call(stack, "GET", f"/api/jobs/{job['id']}")) == before, job["name"]
        assert _writes(driver) == [], job["name"]  # not even a PATCH the API finds empty


def test_an_ended_job_saved_untouched_keeps_its_status(browser: Any, stack: Stack) -> None:
    """A window that closed before the job was made ends it; its status (not one a client may set) is
    shown and not sent back."""
    driver = browser
    job = call(stack, "POST", "/api/jobs", {"name": "f-ended", "cron_expression": "@hourly", "payload": OK,
                                            "end_at": "2020-01-01T00:00:00Z"})  # fmt: skip
    ended = block_until(lambda: _ended(stack, job["id"]), timeout=20, what="the job ended by its window")
    before = _kept(ended)
    _open_edit(driver, stack, job)
    assert find(driver, "#job-status").get_attribute("value") == ended["status"]
    assert find(driver, f"#job-status option[value='{ended['status']}']").get_attribute("disabled") is not None
    find(driver, "#save").click()
    wait(driver, lambda d: d.current_url.endswith(f"#/jobs/{job['id']}"), what="the job page")
    assert _writes(driver) == [] and _kept(call(stack, "GET", f"/api/jobs/{job['id']}")) == before


def _ended(stack: Stack, job_id: int) -> dict[str, Any] | None:
    job: dict[str, Any] = call(stack, "GET", f"/api/jobs/{job_id}")
    return job if job["status"] in ("completed", "expired") else None


def test_an_edit_of_one_field_sends_and_records_that_field_alone(browser: Any, stack: Stack) -> None:
    driver = browser
    jobs = {j["name"]: j for j in call(stack, "GET", "/api/jobs?limit=100")["items"]}
    for name, control, typed, field, value in (
        ("f-complex", "#max_runs", "11", "max_runs", 11),
        ("f-http", "#timeout_s", "42", "timeout_s", 42),  # the payload and its secret are not sent
        ("f-buffer-all", "#jitter_s", "1.5", "jitter_s", 1.5),
    ):
        job = jobs[name]
        before = _kept(call(stack, "GET", f"/api/jobs/{job['id']}"))
        _open_edit(driver, stack, job)
        find(driver, control).clear()
        find(driver, control).send_keys(typed)
        _save(driver, stack, job, f"Saved: {field}")
        assert [(w["method"], w["body"]) for w in _writes(driver)] == [("PATCH", f'{{"{field}":{typed}}}')]
        newest = call(stack, "GET", f"/api/jobs/{job['id']}/revisions")["items"][0]
        assert (newest["number"], newest["fields"], newest["changes"]) == (2, [field], {field: value}), newest
        after = _kept(call(stack, "GET", f"/api/jobs/{job['id']}"))
        assert {k: after[k] for k in JOB_WRITABLE} == {k: before[k] for k in JOB_WRITABLE} | {field: value}


def test_a_one_off_becomes_a_schedule_and_back(browser: Any, stack: Stack) -> None:
    from selenium.webdriver.support.ui import Select

    driver = browser
    job = next(j for j in call(stack, "GET", "/api/jobs?limit=100")["items"] if j["name"] == "f-one-off")
    _open_edit(driver, stack, job)
    assert find(driver, "#run_at").get_attribute("value") == job["run_at"]
    assert find(driver, "#field-run_at").is_displayed() and not find(driver, "#field-cron_expression").is_displayed()
    Select(find(driver, "#schedule_type")).select_by_value("cron")
    cron = find(driver, "#cron_expression")
    cron.clear()
    cron.send_keys("30 6 * * *")
    wait(driver, lambda d: text(d, "#description") == "at 06:30 every day", what="the cron's words")
    _save(driver, stack, job, "Saved: cron_expression, run_at")
    assert [w["body"] for w in _writes(driver)] == ['{"cron_expression":"30 6 * * *","run_at":null}']
    stored = call(stack, "GET", f"/api/jobs/{job['id']}")
    assert (stored["cron_expression"], stored["run_at"], stored["revision"]) == ("30 6 * * *", None, 2)

    _open_edit(driver, stack, stored)
    Select(find(driver, "#schedule_type")).select_by_value("run_at")
    find(driver, "#run_at").send_keys("2032-01-01T00:00:00Z")
    wait(driver, lambda d: "once, at 2032-01-01 00:00:00 UTC" in text(d, "#description"), what="the one-off's words")
    _save(driver, stack, stored, "Saved: cron_expression, run_at")
    stored = call(stack, "GET", f"/api/jobs/{job['id']}")
    assert (stored["cron_expression"], stored["run_at"], stored["revision"]) == (None, "2032-01-01T00:00:00Z", 3)


def test_create_through_the_form_sends_every_field(browser: Any, stack: Stack) -> None:
    from selenium.webdriver.support.ui import Select

    driver = browser
    parent = next(j for j in call(stack, "GET", "/api/jobs?limit=100")["items"] if j["name"] == "f-parent")
    go(driver, stack, "#/new")
    wait(driver, lambda d: find(d, "#name"), what="the form").send_keys("f-created-once")
    driver.execute_script(_SPY)
    Select(find(driver, "#schedule_type")).select_by_value("run_at")
    find(driver, "#save").click()  # no instant yet: said where, nothing sent
    wait(driver, lambda d: "needs the instant" in text(d, "#run_at-problem"), what="the missing instant")
    find(driver, "#run_at").send_keys("2033-03-03T03:03:00+01:00")
    wait(driver, lambda d: text(d, "#description") == "once, at 2033-03-03 02:03:00 UTC", what="the one-off's words")
    find(driver, "#policies summary").click()
    Select(find(driver, "#concurrency_policy")).select_by_value("buffer_all")
    find(driver, "#queue").clear()
    find(driver, "#queue").send_keys("reports")
    find(driver, "#window summary").click()
    for control, typed in (("#max_runs", "4"), ("#catchup_max_per_s", "1.5"), ("#parents", f" {parent['id']} ,")):
        find(driver, control).send_keys(typed)
    find(driver, "#save").click()
    wait(driver, lambda d: text(d, "h1") == "f-created-once" and "Created" in text(d, "#status"), what="the job page")
    (write,) = _writes(driver)
    # apply's marker is apply's; the namespace is the collection's (`?namespace=`), not the body's
    sent = set(JOB_WRITABLE) - {"managed_by", "namespace"}
    assert write["method"] == "POST" and set(json.loads(write["body"])) == sent
    job = next(j for j in call(stack, "GET", "/api/jobs?limit=100")["items"] if j["name"] == "f-created-once")
    assert {k: job[k] for k in ("cron_expression", "run_at", "concurrency_policy", "queue", "max_runs",
                                "catchup_max_per_s", "parents", "start_at")} == {
        "cron_expression": None, "run_at": "2033-03-03T02:03:00Z", "concurrency_policy": "buffer_all",
        "queue": "reports", "max_runs": 4, "catchup_max_per_s": 1.5, "parents": [parent["id"]], "start_at": None,
    }  # fmt: skip


def _screenshot(driver: Any, name: str) -> None:
    """The whole form in one picture (artifacts/browser/<name>.png), for a reviewer's look."""
    height = driver.execute_script(
        "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight"
    )
    driver.set_window_size(1280, min(max(900, int(height)), 2400))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))
    driver.set_window_size(1280, 900)


def test_expectations_are_set_in_the_form_and_a_bad_one_is_marked(browser: Any, stack: Stack) -> None:
    driver = browser
    job = call(stack, "POST", "/api/jobs", {"name": "expecting", "cron_expression": "@daily",
                                            "payload": {"action": "browser.ok"}})  # fmt: skip
    go(driver, stack, f"#/jobs/{job['id']}/edit")
    wait(driver, lambda d: find(d, "#expectations"), what="the form").click()  # opens the group
    find(driver, "#finish_within_s").send_keys("-5")
    find(driver, "#save").click()
    wait(driver, lambda d: text(d, "#expectations-problem") != "", what="the refusal")
    field = find(driver, "#finish_within_s")
    field.clear()
    field.send_keys("90")
    find(driver, "#success_every_s").send_keys("86400")
    find(driver, "#save").click()
    wait(driver, lambda d: f"#/jobs/{job['id']}" in d.current_url and "edit" not in d.current_url, what="saved")
    saved = call(stack, "GET", f"/api/jobs/{job['id']}")
    assert saved["expectations"] == {"finish_within_s": 90, "success_every_s": 86400}
