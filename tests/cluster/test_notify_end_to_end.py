"""From a failing run to a notification and back (issue 24), every part a real process: `cronos api`,
`cronos dispatcher` (the leader: scheduler, health evaluator, notifier) and `cronos executor`, and a
real HTTP receiver checking Standard Webhooks signatures.

A job's task always fails (one retry); the webhook channel attached to it (told after two failures
in a row) gets exactly one `failed` notification (its rate limit holds back the later failures),
carrying the run, the tick's explanation and the console link. The job's payload is then mended
by a PATCH: one `recovered` notification follows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from standardwebhooks import Webhook

from tests.cluster.cli_api import CRONOS, REPO, api_process, clean_env
from tests.cluster.node import Node
from tests.notify_receivers import HttpReceiver, http_receiver
from tests.services import Services
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster

CONSOLE = "https://cronos.example.com"


@pytest.fixture
def cluster_env(services: Services, database_url: str, key_prefix: str) -> dict[str, str]:
    return clean_env(
        DATABASE_URL=database_url, REDIS_URL=services.redis_url, CRONOS_KEY_PREFIX=key_prefix,
        CRONOS_LOG_FORMAT="json", CRONOS_HTTP_ALLOW_NETS="127.0.0.0/8", CRONOS_CONSOLE_URL=CONSOLE,
        CRONOS_HEALTH_INTERVAL_S="0.3", CRONOS_LEADER_TTL_MS="1000", PYTHONPATH=str(REPO),
    )  # fmt: skip


@pytest.fixture
def leader_and_executor(cluster_env: dict[str, str], tmp_path: Path) -> Iterator[list[Node]]:
    nodes = [
        Node("dispatcher", "d1", [CRONOS, "dispatcher"], {**cluster_env, "CRONOS_NODE_ID": "d1"}, tmp_path,
             tmp_path / "d1.log"),
        Node("executor", "e1", [CRONOS, "executor", "--import", "tests.cluster.notify_tasks"],
             {**cluster_env, "CRONOS_NODE_ID": "e1"}, tmp_path, tmp_path / "e1.log"),
    ]  # fmt: skip
    for node in nodes:
        node.start()
    try:
        yield nodes
    finally:
        for node in nodes:
            node.kill()


async def _call(http: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Any:
    async with http.request(method, url, json=body) as reply:
        assert reply.status < 300, (method, url, reply.status, await reply.text())
        return await reply.json() if reply.status != 204 else None


def _kinds(receiver: HttpReceiver) -> list[str]:
    return [str(r.json["type"]) for r in receiver.seen]


async def test_a_failing_job_notifies_once_then_its_recovery(
    leader_and_executor: list[Node], cluster_env: dict[str, str], tmp_path: Path
) -> None:
    variables = {k: cluster_env[k] for k in ("REDIS_URL", "CRONOS_HTTP_ALLOW_NETS", "CRONOS_CONSOLE_URL")}
    database_url, key_prefix = cluster_env["DATABASE_URL"], cluster_env["CRONOS_KEY_PREFIX"]
    with api_process(tmp_path, database_url, key_prefix, **variables) as api:
        async with http_receiver() as receiver, aiohttp.ClientSession() as http:
            job = await _call(http, "POST", f"{api}/api/jobs", {
                "name": "backup", "cron_expression": "* * * * * *", "kind": "task", "status": "paused",
                "payload": {"action": "notify.check"}, "max_retries": 1, "retry_backoff_s": 0.1,
            })  # fmt: skip
            channel = await _call(http, "POST", f"{api}/api/channels", {
                "name": "ops-hook", "kind": "webhook", "url": receiver.url, "jobs": [job["id"]],
                "events": ["failed", "recovered"], "after_failures": 2,  # told at the second failure in a row
                "rate_limit_s": 3600,  # not at the failures after it; a recovery always gets through
            })  # fmt: skip
            await _call(http, "PATCH", f"{api}/api/jobs/{job['id']}", {"status": "active"})

            async def told(kind: str) -> bool:
                return kind in _kinds(receiver)

            await wait_for(lambda: told("job.failed"), timeout=25, interval=0.1, what="the failed notification")
            await _call(
                http, "PATCH", f"{api}/api/jobs/{job['id']}", {"payload": {"action": "notify.check", "ok": True}}
            )
            await wait_for(lambda: told("job.recovered"), timeout=25, interval=0.1, what="the recovered notification")
            deliveries = (await _call(http, "GET", f"{api}/api/channels/{channel['id']}/deliveries"))["items"]
    assert _kinds(receiver) == ["job.failed", "job.recovered"]  # exactly one of each
    secret = channel["webhook_secret"]
    failed, recovered = (Webhook(secret).verify(r.body, r.headers) for r in receiver.seen)  # raises if unsigned
    run = failed["run"]
    assert failed["job"] == {"id": job["id"], "name": "backup", "queue": "default"}
    assert run["state"] == "failed" and run["attempt"] == 2 and "the backup disk is full" in run["error"]
    assert failed["event"]["detail"]["consecutive_failures"] == 2
    assert recovered["event"]["detail"]["after_failures"] >= 2  # the streak it ends reached the threshold
    assert failed["tick"]["scheduled_for"] == run["scheduled_for"] and failed["tick"]["outcome"]
    assert failed["tick"]["cron_expression"] == "* * * * * *"
    assert failed["link"] == f"{CONSOLE}/#/runs/{run['id']}"
    assert (
        recovered["run"]["state"] == "completed" and recovered["link"] == f"{CONSOLE}/#/runs/{recovered['run']['id']}"
    )
    assert {d["state"] for d in deliveries} <= {"sent", "suppressed"}
    assert sorted(d["kind"] for d in deliveries if d["state"] == "sent") == ["failed", "recovered"]
