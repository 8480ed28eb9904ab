"""The circuit breaker end to end (issue 40), every part a real process: `cronos api`, `cronos
dispatcher` (scheduler, health evaluator, breaker, notifier), `cronos executor` and a real HTTP
receiver. A job created through the API alone fails every second; after
CRONOS_BREAKER_DEFAULT_FAILURES (3) failures in a row it pauses itself, with a note saying why, a
revision and an audit entry by the `dispatcher`, and a `paused_by_breaker` notification. Mended and
resumed by hand, it runs and stays active.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from standardwebhooks import Webhook

from tests.cluster.cli_api import REPO, api_process, clean_env
from tests.cluster.test_notify_end_to_end import _call, leader_and_executor  # noqa: F401  (a fixture)
from tests.notify_receivers import http_receiver
from tests.services import Services
from tests.waiting import wait_for

# The leader and an executor of the notification test, with this module's environment.
pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("leader_and_executor")]

THRESHOLD = 3


@pytest.fixture
def cluster_env(services: Services, database_url: str, key_prefix: str) -> dict[str, str]:
    return clean_env(
        DATABASE_URL=database_url, REDIS_URL=services.redis_url, CRONOS_KEY_PREFIX=key_prefix,
        CRONOS_LOG_FORMAT="json", CRONOS_HTTP_ALLOW_NETS="127.0.0.0/8", CRONOS_HEALTH_INTERVAL_S="0.3",
        CRONOS_LEADER_TTL_MS="1000", CRONOS_BREAKER_DEFAULT_FAILURES=str(THRESHOLD), PYTHONPATH=str(REPO),
    )  # fmt: skip


async def test_a_job_failing_k_times_in_a_row_pauses_itself_and_says_why(
    cluster_env: dict[str, str], tmp_path: Path
) -> None:
    variables = {k: cluster_env[k] for k in ("REDIS_URL", "CRONOS_HTTP_ALLOW_NETS")}
    database_url, key_prefix = cluster_env["DATABASE_URL"], cluster_env["CRONOS_KEY_PREFIX"]
    with api_process(tmp_path, database_url, key_prefix, **variables) as api:
        async with http_receiver() as receiver, aiohttp.ClientSession() as http:
            job = await _call(http, "POST", f"{api}/api/jobs", {
                "name": "backup", "cron_expression": "* * * * * *", "kind": "task", "status": "paused",
                "payload": {"action": "notify.check"}, "max_retries": 0,
            })  # fmt: skip
            url = f"{api}/api/jobs/{job['id']}"
            channel = await _call(http, "POST", f"{api}/api/channels", {
                "name": "ops-hook", "kind": "webhook", "url": receiver.url, "jobs": [job["id"]],
                "events": ["paused_by_breaker"],
            })  # fmt: skip
            await _call(http, "PATCH", url, {"status": "active"})

            async def paused() -> bool:
                return str((await _call(http, "GET", url))["status"]) == "paused"

            await wait_for(paused, timeout=30, interval=0.1, what="the breaker's pause")

            async def told() -> bool:
                return len(receiver.seen) >= 1

            await wait_for(told, timeout=20, interval=0.1, what="the notification")
            tripped = await _call(http, "GET", url)
            revision = (await _call(http, "GET", f"{url}/revisions"))["items"][0]
            history = (await _call(http, "GET", f"{url}/history"))["items"]
            runs = (await _call(http, "GET", f"{url}/runs"))["items"]

            # Mended and resumed by hand, it runs and is left alone (its failures were counted at the trip).
            await _call(http, "PATCH", url, {"payload": {"action": "notify.check", "ok": True}})
            await _call(http, "PATCH", url, {"status": "active"})

            async def succeeded() -> bool:
                items = (await _call(http, "GET", f"{url}/runs"))["items"]
                return any(r["state"] == "completed" for r in items)

            await wait_for(succeeded, timeout=30, interval=0.1, what="a run after the resume")
            after = await _call(http, "GET", url)
    assert tripped["pause_note"] == (
        f"paused by the circuit breaker after {THRESHOLD} failed runs in a row (threshold {THRESHOLD})"
    )
    assert sum(r["state"] == "failed" for r in runs) >= THRESHOLD
    assert revision["kind"] == "paused" and revision["actor"] == "dispatcher"
    assert revision["changes"]["pause_note"] == tripped["pause_note"]
    entry = next(e for e in history if e.get("actor") == "dispatcher" and e.get("action") == "paused")
    assert entry["detail"]["breaker"]["threshold"] == THRESHOLD
    [told] = [Webhook(channel["webhook_secret"]).verify(r.body, r.headers) for r in receiver.seen]
    assert told["type"] == "job.paused_by_breaker" and told["job"]["id"] == job["id"]
    assert told["event"]["detail"]["consecutive_failures"] == THRESHOLD
    assert told["event"]["detail"]["pause_note"] == tripped["pause_note"]
    assert after["status"] == "active"


async def test_a_job_s_own_breaker_lets_a_canary_through_and_resumes_when_the_upstream_is_back(
    cluster_env: dict[str, str], tmp_path: Path
) -> None:
    # The job's own threshold (2) over the cluster's (3), and a canary every 2 ticks while held.
    variables = {k: cluster_env[k] for k in ("REDIS_URL", "CRONOS_HTTP_ALLOW_NETS")}
    database_url, key_prefix = cluster_env["DATABASE_URL"], cluster_env["CRONOS_KEY_PREFIX"]
    ready = tmp_path / "upstream-is-back"
    with api_process(tmp_path, database_url, key_prefix, **variables) as api:
        async with http_receiver() as receiver, aiohttp.ClientSession() as http:
            job = await _call(http, "POST", f"{api}/api/jobs", {
                "name": "sync-crm", "cron_expression": "* * * * * *", "kind": "task", "status": "paused",
                "payload": {"action": "notify.upstream", "ready": str(ready)}, "max_retries": 0,
                "expectations": {"breaker": {"failures": 2, "canary_every": 2}},
            })  # fmt: skip
            url = f"{api}/api/jobs/{job['id']}"
            channel = await _call(http, "POST", f"{api}/api/channels", {
                "name": "ops-hook", "kind": "webhook", "url": receiver.url, "jobs": [job["id"]],
                "events": ["paused_by_breaker", "canary_by_breaker", "resumed_by_breaker"],
            })  # fmt: skip
            await _call(http, "PATCH", url, {"status": "active"})

            async def runs() -> list[dict[str, Any]]:
                return list((await _call(http, "GET", f"{url}/runs?limit=100"))["items"])

            async def a_canary_failed() -> bool:
                return any(r["trigger"] == "manual" and r["state"] == "failed" for r in await runs())

            await wait_for(a_canary_failed, timeout=40, interval=0.2, what="a canary that failed")
            tripped = next(r for r in (await _call(http, "GET", f"{url}/revisions"))["items"] if r["number"] == 3)
            held = await _call(http, "GET", url)
            ready.touch()  # the upstream is back: the next canary completes and the breaker resumes the job

            async def resumed_and_ran() -> bool:
                status = (await _call(http, "GET", url))["status"]
                return status == "active" and any(r["trigger"] == "schedule" and r["state"] == "completed"
                                                  for r in await runs())  # fmt: skip

            await wait_for(resumed_and_ran, timeout=40, interval=0.2, what="the resume after a canary succeeded")

            async def told() -> bool:
                return "job.resumed_by_breaker" in [str(r.json["type"]) for r in receiver.seen]

            await wait_for(told, timeout=20, interval=0.1, what="the resume's notification")
            revisions = (await _call(http, "GET", f"{url}/revisions?limit=100"))["items"]
            history = (await _call(http, "GET", f"{url}/history"))["items"]
            ran = await runs()
    assert tripped["kind"] == "paused" and tripped["actor"] == "dispatcher"
    note = tripped["changes"]["pause_note"]  # the job's own threshold, not the cluster's 3
    assert note.startswith("paused by the circuit breaker after ") and "(threshold 2); a canary run every 2" in note
    assert held["status"] == "paused" and "a canary run let through for the tick at" in held["pause_note"]
    by_breaker = [(r["kind"], r["status"]) for r in reversed(revisions) if r["actor"] == "dispatcher"]
    assert by_breaker[0] == ("paused", "paused") and by_breaker[-1] == ("resumed", "active")
    assert len(by_breaker) >= 4  # the trip, two canaries at least (one failed, one completed), the resume
    steps = [e["action"] for e in reversed(history) if e.get("actor") == "dispatcher"]
    assert steps[0] == "paused" and steps[-1] == "resumed" and steps.count("triggered") == len(by_breaker) - 2
    canaries = [r for r in ran if r["trigger"] == "manual"]
    assert {r["state"] for r in canaries} == {"failed", "completed"}
    told_kinds = [Webhook(channel["webhook_secret"]).verify(r.body, r.headers)["type"] for r in receiver.seen]
    assert told_kinds[0] == "job.paused_by_breaker" and told_kinds[-1] == "job.resumed_by_breaker"
    assert "job.canary_by_breaker" in told_kinds
