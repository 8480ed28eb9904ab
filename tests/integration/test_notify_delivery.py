"""Notifications routed and delivered by the leader's notifier (dispatcher/notifier.py): real
PostgreSQL, a real HTTP receiver checking Standard Webhooks signatures, a real SMTP server.

Events are written as the health evaluator writes them (cronos.store.events.insert_events); the
notifier is driven pass by pass (`route_once`, `send_once`), fenced by an epoch taken here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from itertools import pairwise
from typing import Any
from unittest.mock import ANY

import asyncpg
import msgspec
import pytest
from standardwebhooks import Webhook

from cronos.errors import NotLeader
from cronos.events import JobEvent, JobEventKind
from cronos.http_guard import guarded_session
from cronos.metrics import REGISTRY
from cronos.notify import message as msg
from cronos.settings import Settings
from cronos.store.epoch import EpochStore
from cronos.store.events import insert_events
from cronos.store.notify import Outbox
from dispatcher.notifier import Notifier
from tests.integration.api_client import Api, running_api
from tests.notify_receivers import PASSWORD, USER, http_receiver, smtp_server
from tests.waiting import wait_for

NOW = datetime.now(UTC)


@pytest.fixture
def fast(settings: Settings) -> Settings:
    return msgspec.structs.replace(
        settings, notify_retry_base_s=0.01, notify_retry_cap_s=0.02, notify_max_attempts=3, notify_timeout_s=2.0,
        console_url="https://cronos.example.com/",
    )  # fmt: skip


@pytest.fixture
async def api(fast: Settings) -> AsyncIterator[Api]:
    async with running_api(fast) as client:
        yield client


@pytest.fixture
async def notifier(pg_pool: asyncpg.Pool, fast: Settings) -> AsyncIterator[Notifier]:
    epoch = (await EpochStore(pg_pool).take("test-leader")).epoch
    found = Notifier(Outbox(pg_pool), lambda: epoch, fast)
    async with guarded_session(fast.http_allow_nets) as http:
        found.http = http
        yield found


async def _channel(api: Api, **fields: Any) -> dict[str, Any]:
    reply = await api.call("POST", "/api/channels", json=fields)
    assert reply.status == 201, reply.body
    return dict(reply.body)


def _event(job_id: int, kind: str, key: str, *, run_id: int | None = None, at: datetime = NOW,
           **detail: Any) -> JobEvent:  # fmt: skip
    return JobEvent(job_id, JobEventKind(kind), at, key, run_id, detail)


async def _sending(notifier: Notifier, done: Callable[[], bool]) -> None:
    """Send passes until `done()` (retries are due after their backoff: a pass may find none)."""

    async def probe() -> bool:
        await notifier.send_once()
        return done()

    await wait_for(probe, timeout=10, interval=0.01, what="the notifications sent")


def _counted(outcome: str, kind: str = "webhook") -> float:
    return REGISTRY.get_sample_value("cronos_notifications_total", {"kind": kind, "outcome": outcome}) or 0.0


def _last(received: Any) -> str:
    return str(received.path.rsplit("/", 1)[-1])


async def _deliveries(api: Api, channel_id: int) -> list[dict[str, Any]]:
    reply = await api.call("GET", f"/api/channels/{channel_id}/deliveries")
    assert reply.status == 200, reply.body
    return list(reply.body["items"])


async def test_events_reach_every_job_the_listed_jobs_or_the_listed_queues(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    a = (await api.create(name="a"))["id"]
    b = (await api.create(name="b", queue="reports"))["id"]
    c = (await api.create(name="c"))["id"]
    async with http_receiver() as receiver:
        every = await _channel(api, name="every", kind="webhook", url=receiver.url + "/every", events=["failed"])
        only_a = await _channel(api, name="only-a", kind="webhook", url=receiver.url + "/a", jobs=[a])
        reports = await _channel(api, name="reports", kind="webhook", url=receiver.url + "/q", queues=["reports"])
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [_event(j, "failed", f"failed:{j}") for j in (a, b, c)])
        assert await notifier.route_once(NOW) == 3
        assert await notifier.route_once(NOW) == 0  # routed once
        assert await notifier.send_once() == 5
        for got, secret in ((r, {"every": every, "a": only_a, "q": reports}[_last(r)]) for r in receiver.seen):
            assert Webhook(secret["webhook_secret"]).verify(got.body, got.headers)["type"] == "job.failed"
        assert len({r.headers["webhook-id"] for r in receiver.seen}) == 5  # one webhook-id per delivery
    assert sorted(d["job_id"] for d in await _deliveries(api, every["id"])) == sorted([a, b, c])
    assert [d["job_id"] for d in await _deliveries(api, only_a["id"])] == [a]
    assert [d["job_id"] for d in await _deliveries(api, reports["id"])] == [b]
    assert {d["state"] for d in await _deliveries(api, every["id"])} == {"sent"}
    assert await pg_pool.fetchval("SELECT count(*) FROM job_events WHERE routed_at IS NULL") == 0


async def test_a_selector_channel_hears_of_the_jobs_whose_labels_match(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    prod = (await api.create(name="orders", labels={"team": "data", "env": "prod"}))["id"]
    dev = (await api.create(name="orders-dev", labels={"team": "data", "env": "dev"}))["id"]
    web = (await api.create(name="cache", queue="reports", labels={"team": "web"}))["id"]
    async with http_receiver() as receiver:
        data = await _channel(api, name="data", kind="webhook", url=receiver.url + "/d", selector="team=data,env!=dev")
        either = await _channel(api, name="either", kind="webhook", url=receiver.url + "/e", queues=["reports"],
                                selector="env=dev")  # fmt: skip
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [_event(j, "failed", f"failed:{j}") for j in (prod, dev, web)])
        assert await notifier.route_once(NOW) == 3
        await _sending(notifier, lambda: len(receiver.seen) == 3)
    assert [d["job_id"] for d in await _deliveries(api, data["id"])] == [prod]
    assert sorted(d["job_id"] for d in await _deliveries(api, either["id"])) == sorted([dev, web])
    # A label changed after the event does not re-route it; the next event follows the new labels.
    assert (await api.call("PATCH", f"/api/jobs/{dev}", json={"labels": {"team": "data", "env": "prod"}})).status == 200
    async with pg_pool.acquire() as conn:
        await insert_events(conn, [_event(dev, "failed", f"failed-again:{dev}", at=NOW + timedelta(seconds=1))])
    assert await notifier.route_once(NOW) == 1
    assert sorted(d["job_id"] for d in await _deliveries(api, data["id"])) == sorted([prod, dev])


async def test_a_webhook_is_signed_and_carries_the_run_the_tick_and_a_link(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    job = await api.create(name="nightly", cron_expression="0 3 * * *")
    tick = datetime(2030, 1, 2, 3, 0, tzinfo=UTC)
    run_id = await pg_pool.fetchval(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, error, finished_at)"
        " VALUES ($1, $2, 1, 'schedule', 'failed', $2, $3, $2) RETURNING id", job["id"], tick, "boom " * 300,
    )  # fmt: skip
    async with http_receiver() as receiver:
        created = await _channel(api, name="hook", kind="webhook", url=receiver.url)
        secret = created["webhook_secret"]
        assert created["secret"] == "***" and secret.startswith("whsec_")
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [_event(job["id"], "failed", "f1", run_id=run_id, consecutive_failures=1)])
        await notifier.route_once(NOW)
        await notifier.send_once()
        (got,) = receiver.seen
    body = Webhook(secret).verify(got.body, got.headers)  # raises unless the signature is right
    assert body["type"] == "job.failed"
    assert body["job"] == {"id": job["id"], "name": "nightly", "queue": "default"}
    assert body["run"]["id"] == run_id and body["run"]["state"] == "failed" and body["run"]["attempt"] == 1
    assert len(body["run"]["error"]) == 500  # an excerpt
    assert body["tick"]["scheduled_for"].startswith("2030-01-02T03:00:00") and body["tick"]["outcome"] == "ran"
    assert body["tick"]["cron_expression"] == "0 3 * * *"
    assert body["link"] == f"https://cronos.example.com/#/runs/{run_id}"
    assert body["event"]["detail"] == {"consecutive_failures": 1}


async def test_after_n_failures_rate_limit_and_quiet_hours(api: Api, notifier: Notifier, pg_pool: asyncpg.Pool) -> None:
    job = (await api.create(name="flaky"))["id"]
    quiet_now = {"start": "00:00", "end": "23:59", "timezone": "UTC"}
    async with http_receiver() as receiver:
        third = await _channel(api, name="third", kind="webhook", url=receiver.url, after_failures=3,
                               events=["failed", "recovered"])  # fmt: skip
        limited = await _channel(api, name="limited", kind="webhook", url=receiver.url, rate_limit_s=3600,
                                 events=["failed", "recovered"])  # fmt: skip
        held = await _channel(api, name="held", kind="webhook", url=receiver.url, quiet_hours=quiet_now)
        dropped = await _channel(api, name="dropped", kind="webhook", url=receiver.url,
                                 quiet_hours={**quiet_now, "hold": False})  # fmt: skip
        events = [
            _event(job, "failed", f"f{n}", at=NOW + timedelta(minutes=n), consecutive_failures=n) for n in (1, 2, 3)
        ] + [
            _event(job, "recovered", "r", at=NOW + timedelta(minutes=4), after_failures=3)
        ]  # as the health evaluator says
        async with pg_pool.acquire() as conn:
            await insert_events(conn, events)
        now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
        suppressed = _counted("suppressed")
        await notifier.route_once(now)
    assert (
        _counted("suppressed") - suppressed
        == 8
        == await pg_pool.fetchval("SELECT count(*) FROM notification_deliveries WHERE state = 'suppressed'")
    )
    states = {d["occurred_at"][:19]: (d["state"], d["reason"]) for d in await _deliveries(api, third["id"])}
    assert [s for s, _ in states.values()].count("pending") == 2  # the third failure and the recovery
    assert any("below the failure threshold (1 of 3" in (r or "") for _, r in states.values())
    limited_rows = sorted(await _deliveries(api, limited["id"]), key=lambda d: d["occurred_at"])
    assert [d["state"] for d in limited_rows] == ["pending", "suppressed", "suppressed", "pending"]
    assert "rate limited" in limited_rows[1]["reason"]
    held_rows = await _deliveries(api, held["id"])
    assert {d["state"] for d in held_rows} == {"pending"}
    assert {d["due_at"][:16] for d in held_rows} == {"2030-01-01T23:59"}  # held until the quiet hours end
    assert {d["state"] for d in await _deliveries(api, dropped["id"])} == {"suppressed"}


async def test_a_job_alternating_failure_and_success_does_not_slip_past_the_rate_limit(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    job = (await api.create(name="flapping"))["id"]
    async with http_receiver() as receiver:
        await _channel(api, name="hook", kind="webhook", url=receiver.url, rate_limit_s=3600,
                       events=["failed", "recovered"])  # fmt: skip
        for batch in range(3):  # across router passes: what the channel heard is read back from the outbox
            minute = NOW + timedelta(minutes=2 * batch)
            async with pg_pool.acquire() as conn:
                await insert_events(conn, [_event(job, "failed", f"f{batch}", at=minute, consecutive_failures=1),
                                           _event(job, "recovered", f"r{batch}", at=minute + timedelta(minutes=1),
                                                  after_failures=1)])  # fmt: skip
            assert await notifier.route_once(NOW) == 2
        await _sending(notifier, lambda: len(receiver.seen) >= 2)
        assert await notifier.send_once() == 0  # nothing else was due
    assert [r.json["type"] for r in receiver.seen] == ["job.failed", "job.recovered"]
    reasons = await pg_pool.fetch("SELECT kind, reason FROM notification_deliveries WHERE state = 'suppressed'")
    assert sorted(r["kind"] for r in reasons) == ["failed", "failed", "recovered", "recovered"]
    assert {r["reason"] for r in reasons if r["kind"] == "recovered"} == {
        "the channel was not told of the failures it ends"
    }


async def test_quiet_hours_release_what_they_held_paced(api: Api, notifier: Notifier, pg_pool: asyncpg.Pool) -> None:
    jobs = [(await api.create(name=f"j{n}"))["id"] for n in range(4)]
    in_quiet_hours = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    async with http_receiver() as receiver:
        hook = await _channel(api, name="held", kind="webhook", url=receiver.url,
                              quiet_hours={"start": "00:00", "end": "23:59", "timezone": "UTC"})  # fmt: skip
        for batch in (jobs[:3], jobs[3:]):  # the second pass reads what the first held from the outbox
            async with pg_pool.acquire() as conn:
                await insert_events(conn, [_event(job, "failed", f"f{job}") for job in batch])
            await notifier.route_once(in_quiet_hours)
        due = sorted(datetime.fromisoformat(d["due_at"]) for d in await _deliveries(api, hook["id"]))
        end = datetime(2030, 1, 1, 23, 59, tzinfo=UTC)
        assert due == [end + timedelta(seconds=n) for n in range(4)]  # not four at 23:59:00
        # The quiet hours end now: the sender follows the pace.
        await pg_pool.execute("UPDATE notification_deliveries SET due_at = now() + (due_at - $1)", end)
        await _sending(notifier, lambda: len(receiver.seen) == 4)
    sent = [r["sent_at"] for r in await pg_pool.fetch("SELECT sent_at FROM notification_deliveries ORDER BY due_at")]
    gaps = [(b - a).total_seconds() for a, b in pairwise(sent)]
    assert all(gap >= 0.9 for gap in gaps), gaps


async def test_a_refused_delivery_is_retried_with_backoff_then_sent_once(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    job = (await api.create(name="j"))["id"]
    async with http_receiver(statuses=[500, 500, 200]) as receiver:
        channel = await _channel(api, name="hook", kind="webhook", url=receiver.url)
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [_event(job, "failed", "f")])
        await notifier.route_once(NOW)
        await notifier.export(NOW)
        assert REGISTRY.get_sample_value("cronos_notifications_pending") == 1
        before = {outcome: _counted(outcome) for outcome in ("sent", "retried", "failed")}
        await _sending(notifier, lambda: len(receiver.seen) == 3)
        await notifier.send_once()
        assert [r.status for r in receiver.seen] == [500, 500, 200]
        assert {outcome: _counted(outcome) - n for outcome, n in before.items()} == {
            "sent": 1,
            "retried": 2,
            "failed": 0,
        }
        await notifier.export(NOW)
        assert REGISTRY.get_sample_value("cronos_notifications_pending") == 0
        assert len({r.headers["webhook-id"] for r in receiver.seen}) == 1  # the same message each time
    (delivery,) = await _deliveries(api, channel["id"])
    assert delivery["state"] == "sent" and delivery["attempts"] == 3 and delivery["last_error"] is None


async def test_a_delivery_that_never_gets_through_ends_failed_with_its_error(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    job = (await api.create(name="j"))["id"]
    async with http_receiver(statuses=[503]) as receiver:
        channel = await _channel(api, name="hook", kind="webhook", url=receiver.url)
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [_event(job, "failed", "f")])
        await notifier.route_once(NOW)
        await pg_pool.execute("UPDATE notification_deliveries SET due_at = now() - interval '90 seconds'")
        await notifier.export(NOW)
        assert REGISTRY.get_sample_value("cronos_notifications_oldest_due_age_seconds") >= 90  # type: ignore[operator]
        failed = _counted("failed")
        await _sending(notifier, lambda: len(receiver.seen) >= 3)
        assert await notifier.send_once() == 0
        assert _counted("failed") - failed == 1
        assert len(receiver.seen) == 3  # notify_max_attempts
    (delivery,) = await _deliveries(api, channel["id"])
    assert delivery["state"] == "failed" and delivery["attempts"] == 3
    assert delivery["last_error"].startswith("HTTP 503 from http://127.0.0.1:")
    assert delivery["last_error"].endswith("/***: receiver says no")  # its path, read with a read token, not shown


async def test_email_and_slack_reach_real_servers_and_no_secret_shows(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    job = (await api.create(name="backup"))["id"]
    with smtp_server() as smtp:
        async with http_receiver(statuses=[500, 200]) as slack:
            slack_url = slack.url + "/services/T000/B000/slack-s3cret-token"
            mail = await _channel(api, name="mail", kind="email", smtp={
                "host": smtp.host, "port": smtp.port, "security": "none", "user": USER, "password": PASSWORD,
                "from": "cronos@example.com", "to": ["ops@example.com", "oncall@example.com"]})  # fmt: skip
            chat = await _channel(api, name="chat", kind="slack", url=slack_url)
            async with pg_pool.acquire() as conn:
                await insert_events(conn, [_event(job, "missed", "m", scheduled_for="2030-01-01T00:05:00+00:00")])
            await notifier.route_once(NOW)
            await _sending(notifier, lambda: bool(smtp.mailbox.messages and slack.accepted()))
            (message,) = smtp.mailbox.messages
            assert message["Subject"] == "[Cronos] backup missed a tick"
            assert message["To"] == "ops@example.com, oncall@example.com" and smtp.mailbox.logins == [USER]
            text = message.get_payload(decode=True).decode()
            assert (
                "Tick 2030-01-01T00:05:00Z of `*/5 * * * *` (UTC), revision 1" in text
                and f"https://cronos.example.com/#/jobs/{job}" in text
            )
            assert slack.accepted()[0].json["text"].startswith("*backup missed a tick*")
    shown = [(await api.call("GET", path)).body for path in
             ("/api/channels", f"/api/channels/{mail['id']}", f"/api/channels/{chat['id']}",
              f"/api/channels/{chat['id']}/deliveries")]  # fmt: skip
    assert mail["smtp"]["password"] == "***" and chat["url"] == "***"
    for text in [*map(str, shown), str(mail), str(chat), caplog.text]:
        assert PASSWORD not in text and "slack-s3cret-token" not in text
    (failed_once,) = await _deliveries(api, chat["id"])
    assert failed_once["state"] == "sent" and failed_once["attempts"] == 2


# A job name that once wrote its own headers and body into the email (Python decodes the
# encoded word), and one that made every email of its job fail (U+2028 is a line break to Python).
INJECTING = "=?utf-8?q?x=0D=0AReply-To:_evil@attacker.example=0D=0A=0D=0Aattacker_text?="
SEPARATED = "nightly\u2028backup"
EMAIL_HEADERS = ["Subject", "From", "To", "Date", "Message-ID", "Content-Type", "Content-Transfer-Encoding",
                 "MIME-Version"]  # fmt: skip


async def test_job_names_do_not_steer_an_email_and_every_job_gets_its_alert(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    jobs = {name: (await api.create(name=name))["id"] for name in (INJECTING, SEPARATED)}
    with smtp_server() as smtp:
        await _channel(api, name="mail", kind="email", smtp={
            "host": smtp.host, "port": smtp.port, "security": "none", "from": "cronos@alerts.example.com",
            "to": ["ops@example.com"]})  # fmt: skip
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [_event(job, "failed", f"f{job}") for job in jobs.values()])
        await notifier.route_once(NOW)
        await _sending(notifier, lambda: len(smtp.mailbox.messages) == 2)
        received = {m["Subject"]: m for m in smtp.mailbox.messages}
    assert set(received) == {"[Cronos] = ?utf-8?q?x=0D=0AReply-To:_evil@attacker.example=0D=0A=0D=0Aattacker_text?="
                             " failed", "[Cronos] nightly backup failed"}  # fmt: skip
    for message in received.values():
        assert list(message.keys()) == EMAIL_HEADERS  # no Reply-To, no header of the name's
        assert message["To"] == "ops@example.com"
        assert abs(parsedate_to_datetime(message["Date"]) - datetime.now(UTC)) < timedelta(minutes=5)
        assert re.fullmatch(r"<cronos\.notification\.\d+\.[0-9a-f]{20}@alerts\.example\.com>", message["Message-ID"])
        text = message.get_payload(decode=True).decode()
        assert text.splitlines()[0] in {f"{INJECTING} failed.", "nightly backup failed."}  # the name, literal
    assert len({m["Message-ID"] for m in received.values()}) == 2


async def test_names_and_errors_do_not_read_as_slack_markup(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    job = (await api.create(name="<!channel> & <http://evil.example|Open the console>"))["id"]
    run_id = await pg_pool.fetchval(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, error, finished_at)"
        " VALUES ($1, now(), 1, 'schedule', 'failed', now(), '<!here> see <https://evil.example|logs>', now())"
        " RETURNING id", job,
    )  # fmt: skip
    async with http_receiver() as slack:
        await _channel(api, name="chat", kind="slack", url=slack.url + "/services/T0/B0/x")
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [_event(job, "failed", "f", run_id=run_id)])
        await notifier.route_once(NOW)
        await _sending(notifier, lambda: len(slack.accepted()) == 1)
    text = slack.accepted()[0].json["text"]
    assert text.startswith("*&lt;!channel&gt; &amp; &lt;http://evil.example|Open the console&gt; failed*\n"), text
    assert "Error: &lt;!here&gt; see &lt;https://evil.example|logs&gt;" in text
    assert "<" not in text and ">" not in text


async def test_a_test_notification_is_queued_by_the_api_and_sent_by_the_leader(api: Api, notifier: Notifier) -> None:
    async with http_receiver() as receiver:
        channel = await _channel(api, name="hook", kind="webhook", url=receiver.url)
        reply = await api.call("POST", f"/api/channels/{channel['id']}/test")
        assert reply.status == 202 and reply.body["state"] == "pending", reply.body
        await notifier.send_once()
        (got,) = receiver.seen
        assert got.json["type"] == "cronos.test" and got.json["event"]["detail"] == {"requested_by": "local"}
    (delivery,) = await _deliveries(api, channel["id"])
    assert delivery["state"] == "sent"


async def test_a_deposed_leader_neither_routes_nor_claims(api: Api, pg_pool: asyncpg.Pool, fast: Settings) -> None:
    job = (await api.create(name="j"))["id"]
    old = (await EpochStore(pg_pool).take("old")).epoch
    await EpochStore(pg_pool).take("new")
    stale = Notifier(Outbox(pg_pool), lambda: old, fast)
    async with http_receiver() as receiver:
        channel = await _channel(api, name="hook", kind="webhook", url=receiver.url)
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [_event(job, "failed", "f")])
        with pytest.raises(NotLeader):
            await stale.route_once(NOW)
        assert (await api.call("POST", f"/api/channels/{channel['id']}/test")).status == 202
        with pytest.raises(NotLeader):
            await stale.send_once()
        assert receiver.seen == []
    assert await pg_pool.fetchval("SELECT count(*) FROM job_events WHERE routed_at IS NULL") == 1
    assert await pg_pool.fetchval("SELECT attempts FROM notification_deliveries") == 0  # not claimed


async def test_events_no_channel_hears_of_are_routed_without_a_delivery(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    job = (await api.create(name="j"))["id"]
    async with pg_pool.acquire() as conn:
        await insert_events(conn, [_event(job, "late_start", "l1")])
    assert await notifier.route_once(NOW) == 1  # no channel at all
    await _channel(api, name="only-failures", kind="slack", url="https://hooks.slack.com/services/x")
    async with pg_pool.acquire() as conn:
        await insert_events(conn, [_event(job, "late_start", "l2")])
    assert await notifier.route_once(NOW) == 1  # a channel that does not hear late starts
    assert await pg_pool.fetchval("SELECT count(*) FROM job_events WHERE routed_at IS NULL") == 0
    assert await pg_pool.fetchval("SELECT count(*) FROM notification_deliveries") == 0


async def test_settled_deliveries_go_with_the_runs_retention(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    async with http_receiver() as receiver:
        channel = await _channel(api, name="hook", kind="webhook", url=receiver.url)
        for _ in range(2):
            assert (await api.call("POST", f"/api/channels/{channel['id']}/test")).status == 202
        await notifier.send_once()
    assert (await api.call("POST", f"/api/channels/{channel['id']}/test")).status == 202  # pending
    await pg_pool.execute("UPDATE notification_deliveries SET created_at = now() - interval '31 days'")
    assert await notifier.purge_once(datetime.now(UTC)) == 2  # the default retention is 30 days
    assert [d["state"] for d in await _deliveries(api, channel["id"])] == ["pending"]


async def test_an_event_whose_message_cannot_be_built_holds_back_no_other(
    api: Api,
    notifier: Notifier,
    pg_pool: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = (await api.create(name="j"))["id"]
    build = msg.build

    def breaks_on_poison(**parts: Any) -> dict[str, Any]:  # the message's code failing on one event's data
        if "poison" in parts["event"]["detail"]:
            raise ValueError("cannot show this detail")
        return build(**parts)

    monkeypatch.setattr(msg, "build", breaks_on_poison)
    async with http_receiver() as receiver:
        hook = await _channel(api, name="hook", kind="webhook", url=receiver.url)
        async with pg_pool.acquire() as conn:
            await insert_events(conn, [
                _event(job, "failed", "poison", poison=True),
                # A tick out of the range the explanation can compute: the message goes without it.
                _event(job, "missed", "year-one", scheduled_for="0001-01-01T00:00:00+00:00"),
                _event(job, "failed", "fine", consecutive_failures=2),
            ])  # fmt: skip
        with caplog.at_level(logging.WARNING, logger="dispatcher.notifier"):
            assert await notifier.route_once(NOW) == 3  # one pass: none holds back the others
        assert await notifier.route_once(NOW) == 0
        await _sending(notifier, lambda: len(receiver.seen) == 3)
        bodies = {b["event"]["id"]: b for b in (Webhook(hook["webhook_secret"]).verify(r.body, r.headers)
                                                 for r in receiver.seen)}  # fmt: skip
    (poison,) = (b for b in bodies.values() if "detail" not in b["event"])
    (year_one,) = (b for b in bodies.values() if b["type"] == "job.missed")
    (fine,) = (b for b in bodies.values() if b["event"].get("detail", {}).get("consecutive_failures") == 2)
    assert poison == {
        "type": "job.failed", "event": {"id": poison["event"]["id"], "kind": "failed", "occurred_at": ANY},
        "job": {"id": job, "name": "j", "queue": "default"}, "run": None, "tick": None, "link": None,
    }  # fmt: skip
    assert year_one["tick"] is None and year_one["event"]["detail"]["scheduled_for"].startswith("0001-01-01")
    assert year_one["link"] == f"https://cronos.example.com/#/jobs/{job}"
    assert fine["link"] == f"https://cronos.example.com/#/jobs/{job}"
    warned = [r for r in caplog.records if getattr(r, "event", None) == "notify.minimal_message"]
    assert [getattr(r, "event_id", None) for r in warned] == [poison["event"]["id"]]


async def test_a_delivery_the_sender_cannot_handle_ends_failed_and_holds_back_no_other(
    api: Api, notifier: Notifier, pg_pool: asyncpg.Pool
) -> None:
    async with http_receiver() as slack:
        chat = await _channel(api, name="chat", kind="slack", url=slack.url + "/services/T0/B0/slack-s3cret")
        # A stored message of a shape no Slack text can be made of (say, written by another version).
        await pg_pool.execute(
            "INSERT INTO notification_deliveries (channel_id, kind, occurred_at, message)"
            " VALUES ($1, 'test', now(), $2)", chat["id"], {"event": 5, "job": 5},
        )  # fmt: skip
        assert (await api.call("POST", f"/api/channels/{chat['id']}/test")).status == 202
        await _sending(notifier, lambda: len(slack.accepted()) == 1)

        async def settled() -> bool:
            await notifier.send_once()
            return all(d["state"] != "pending" for d in await _deliveries(api, chat["id"]))

        await wait_for(settled, timeout=10, interval=0.01, what="the broken delivery to end")
    broken, fine = sorted(await _deliveries(api, chat["id"]), key=lambda d: d["id"])
    assert fine["state"] == "sent" and slack.accepted()[0].json["text"].startswith("*Test notification")
    assert broken["state"] == "failed" and broken["attempts"] == 3
    assert broken["last_error"] == "unexpected AttributeError while sending"
