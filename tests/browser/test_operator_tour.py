"""The operator's daily loop, as an operator meets it (issue 24): one `cronos dev` stack with a
webhook channel to a real receiver, and three jobs that go wrong in the three ways a scheduler must
tell of — a job that fails, a tick that goes missing, a run that overruns what its job expects.
The receiver gets each notification; the console shows each verdict with its reason; the pictures
go to artifacts/browser/tour-*.png for people reviewing a run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, find, go, screenshot_artifact, text, wait
from tests.cluster.receiver import Receiver
from tests.waiting import block_until

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(150)]

STACK_ENV = {  # this module's stack (tests/browser/conftest.py)
    "CRONOS_HEALTH_INTERVAL_S": "0.5",  # the leader judges jobs every half second, not every 5 s
    "CRONOS_AUDIT_INTERVAL_S": "2",  # ... and audits 2 s windows that settled 2 s ago
    "CRONOS_AUDIT_SETTLE_S": "2",
    "CRONOS_HTTP_ALLOW_NETS": "127.0.0.1/32",  # the receiver is on loopback
    "CRONOS_CONSOLE_URL": "http://console.example",
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    hooks = Receiver()
    hooks.start()
    try:
        yield hooks
    finally:
        hooks.stop()


def _events(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(d.body) for d in receiver.deliveries() if d.path == "/ops"]


def _told(receiver: Receiver, kind: str, job: str) -> dict[str, Any] | None:
    return next((m for m in _events(receiver) if m["event"]["kind"] == kind and m["job"]["name"] == job), None)


async def _lose_a_tick(database_url: str, job_id: int) -> str:
    """A completed tick's run deleted from the ledger, as if it had never been written."""
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            "DELETE FROM runs WHERE id = (SELECT id FROM runs WHERE job_id = $1 AND state = 'completed' "
            "ORDER BY scheduled_for DESC LIMIT 1) RETURNING scheduled_for",
            job_id,
        )
        assert row is not None
        return str(row["scheduled_for"].isoformat())
    finally:
        await conn.close()


def test_a_failing_job_a_missed_tick_and_an_overrunning_run_are_told_and_shown(
    browser: Any, stack: Stack, receiver: Receiver
) -> None:
    import asyncio

    driver, tour = browser, stack
    call(tour, "POST", "/api/channels", {"name": "ops", "kind": "webhook", "url": receiver.url("/ops"),
                                         "events": ["failed", "missed", "overran"]})  # fmt: skip
    failing = call(tour, "POST", "/api/jobs", {"name": "nightly-report", "cron_expression": "@yearly",
                                               "payload": {"action": "browser.fail"}})  # fmt: skip
    heartbeat = call(tour, "POST", "/api/jobs", {"name": "heartbeat-sync", "cron_expression": "* * * * * *",
                                                 "payload": {"action": "browser.ok"}})  # fmt: skip
    slow = call(tour, "POST", "/api/jobs", {"name": "slow-export", "cron_expression": "@yearly",
                                            "payload": {"action": "browser.slow", "seconds": 30},
                                            "expectations": {"finish_within_s": 1}})  # fmt: skip

    # 1. A job that fails: its run fails, the channel is told once, the job page says why.
    call(tour, "POST", f"/api/jobs/{failing['id']}/trigger")
    told = block_until(
        lambda: _told(receiver, "failed", "nightly-report"), timeout=30, interval=0.2, what="the failed notice"
    )
    assert told["run"]["state"] == "failed" and "the disk is full" in told["run"]["error"]
    assert told["link"].startswith("http://console.example/#/runs/")
    go(driver, tour, f"#/jobs/{failing['id']}")
    wait(driver, lambda d: text(d, "#verdict") == "failing", timeout=30, what="the failing verdict")
    screenshot_artifact(driver, "tour-failing-job")

    # 2. An overrunning run: still running past its job's finish_within, told while it runs.
    run = call(tour, "POST", f"/api/jobs/{slow['id']}/trigger")
    told = block_until(
        lambda: _told(receiver, "overran", "slow-export"), timeout=30, interval=0.2, what="the overran notice"
    )
    assert told["run"]["id"] == run["id"]
    go(driver, tour, f"#/jobs/{slow['id']}")
    wait(driver, lambda d: text(d, "#verdict") == "overrunning", timeout=30, what="the overrunning verdict")
    assert "running" in text(driver, "#runs")
    screenshot_artifact(driver, "tour-overrunning-run")
    call(tour, "POST", f"/api/runs/{run['id']}/cancel")  # the operator stops it
    block_until(lambda: call(tour, "GET", f"/api/runs/{run['id']}")["state"] == "cancelled", timeout=30,
                interval=0.2, what="the run cancelled")  # fmt: skip

    # 3. A tick that goes missing from the ledger: the auditor finds it, the channel is told.
    block_until(lambda: len(call(tour, "GET", f"/api/jobs/{heartbeat['id']}/runs")["items"]) >= 3, timeout=30,
                interval=0.2, what="a few heartbeat runs")  # fmt: skip
    lost = asyncio.run(_lose_a_tick(tour.database_url, heartbeat["id"]))
    told = block_until(
        lambda: _told(receiver, "missed", "heartbeat-sync"), timeout=40, interval=0.2, what="the missed notice"
    )
    assert told["event"]["detail"]["scheduled_for"][:19] == lost[:19]
    go(driver, tour, f"#/jobs/{heartbeat['id']}")
    # The job runs on (its verdict is back to ok), and its page names the tick it missed.
    wait(driver, lambda d: "Missed tick" in text(d, "#health"), timeout=30, what="the missed tick on the job page")
    screenshot_artifact(driver, "tour-missed-tick")

    # The failures across jobs, in one view; and the channel's deliveries.
    go(driver, tour, "#/runs?state=failed")
    wait(driver, lambda d: "nightly-report" in text(d, "main"), what="the failed run listed")
    screenshot_artifact(driver, "tour-runs-failed")
    go(driver, tour, "#/channels")
    wait(driver, lambda d: "sent" in text(d, "#deliveries"), what="the deliveries listed")
    screenshot_artifact(driver, "tour-channels")
    go(driver, tour, "#/jobs")
    wait(driver, lambda d: "failing" in text(d, "main"), what="the verdict badges")
    screenshot_artifact(driver, "tour-jobs")
    assert find(driver, "main")
    kinds = sorted((m["event"]["kind"], m["job"]["name"]) for m in _events(receiver))
    assert kinds.count(("failed", "nightly-report")) == 1, kinds  # told once, not once per pass
    assert Path("artifacts/browser/tour-jobs.png").exists()
