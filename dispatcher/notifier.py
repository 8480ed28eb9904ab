"""The leader's notifier: job events -> deliveries (router) -> channels (sender), from a
PostgreSQL outbox, fenced by the leader's epoch.

Router: takes unrouted job events (written by the health evaluator, cronos.store.events), decides
per channel with the pure rules (cronos.notify.rules), builds each message once (cronos.notify.
message: the event, job, run, the tick's explanation, a console link; each on its own, so an
event whose message cannot be built gets a minimal one and holds back no other) and writes one delivery per
matching channel, marking the events routed in the same fenced transaction: an event is routed
once, by one leader, and nothing routed is lost with a crash.

Sender: claims due deliveries with a lease (committed before the send: a new leader does not send
a leased delivery again while its lease runs), sends them, then marks each `sent`, or schedules
the next try with backoff (cronos.backoff), or gives up after CRONOS_NOTIFY_MAX_ATTEMPTS
(`failed`) -- each mark fenced and only from `pending`. A leader killed after a receiver accepted a
notification but before its mark committed leaves it pending: the next leader sends it again once
the lease has run out, with the same webhook-id, so the receiver can drop the repeat.

Tests drive `route_once(now)` and `send_once()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import msgspec

from cronos import metrics
from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable, NotFound, NotLeader
from cronos.http_guard import guarded_session
from cronos.logs import bind
from cronos.notify import channels as ch
from cronos.notify import message as msg
from cronos.notify.rules import Outcome, retry_at, route
from cronos.notify.send import SendFailed, send
from cronos.redact import SECRET
from cronos.settings import Settings
from cronos.store.notify import Claimed, EventRow, Outbox
from dispatcher.election import LeadershipLost
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.notifier")

BATCH = 100
POLL_S = 0.5
METRICS_EVERY = timedelta(seconds=15)  # the pending deliveries' gauges, this often
PURGE_EVERY = timedelta(hours=1)  # settled deliveries older than CRONOS_RUNS_RETENTION go, this often
_FATAL = (BackendUnavailable, NotLeader, LeadershipLost)


def _tick_of(event: EventRow) -> datetime | None:
    """The tick the event is about: its run's, or the one its detail names (a missed tick)."""
    if event.run_scheduled_for is not None:
        return event.run_scheduled_for
    raw = event.detail.get("scheduled_for")
    if isinstance(raw, str):
        try:
            return datetime.fromisoformat(raw)
        except ValueError:
            return None
    return None


def _scrubbed(text: str, channel: ch.Channel) -> str:
    """A send's error with the channel's secrets (had one slipped into it) shown as ***."""
    secrets = [channel.url if channel.kind == "slack" else None, channel.secret]
    secrets.append(channel.smtp.password if channel.smtp is not None else None)
    for value in secrets:
        if value:
            text = text.replace(value, SECRET)
    return text


class Notifier:
    def __init__(self, outbox: Outbox, epoch: Callable[[], int], settings: Settings, *, poll_s: float = POLL_S) -> None:
        self._outbox = outbox
        self._epoch = epoch  # the current epoch, or raises LeadershipLost
        self._settings = settings
        self._poll_s = poll_s
        self._lease_s = 2 * settings.notify_timeout_s + 1  # longer than any send takes (an email's is bounded at 2x)
        self._link_base = settings.console_url or settings.api_url
        self.http: aiohttp.ClientSession | None = None
        self._purged_at: datetime | None = None
        self._exported_at: datetime | None = None

    async def run(self, term: Lifetime) -> None:
        try:
            async with guarded_session(self._settings.http_allow_nets) as http:
                self.http = http
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._loop(term, self._route_pass), name="notifier:route")
                    group.create_task(self._loop(term, self._send_pass), name="notifier:send")
        finally:
            metrics.forget_pending()  # a node that no longer leads shows no stale backlog

    async def _loop(self, term: Lifetime, work: Callable[[], Any]) -> None:
        while True:
            try:
                busy = await work()
            except _FATAL:
                raise
            except Exception as exc:  # a bug in one pass must not take the leader down: logged, retried
                log.warning("notifier pass failed: %s", exc, exc_info=True, extra={"event": "notify.pass_failed"})
                busy = False
            if not busy:
                await term.sleep(self._poll_s)
            else:
                term.checkpoint()

    async def _route_pass(self) -> bool:
        now = datetime.now(UTC)
        if self._purged_at is None or now - self._purged_at >= PURGE_EVERY:
            await self.purge_once(now)
        if self._exported_at is None or now - self._exported_at >= METRICS_EVERY:
            await self.export(now)
        return await self.route_once(now) >= BATCH

    async def purge_once(self, now: datetime) -> int:
        """Deliveries keep as long as runs do (CRONOS_RUNS_RETENTION; 0: forever); pending ones stay."""
        self._purged_at = now
        retention = self._settings.runs_retention_s
        if not retention:
            return 0
        purged = await self._outbox.purge(self._epoch(), now - timedelta(seconds=retention), 10 * BATCH)
        if purged:
            log.info("old deliveries purged", extra={"event": "notify.purged", "deliveries": purged})
        return purged

    async def export(self, now: datetime) -> None:
        """The pending deliveries' gauges (the counters move as deliveries are decided)."""
        self._exported_at = now
        metrics.set_pending(*await self._outbox.pending())

    async def _send_pass(self) -> bool:
        return await self.send_once() >= BATCH

    # --- router ---

    async def route_once(self, now: datetime) -> int:
        """Route one batch of unrouted events; how many events it took."""
        events = await self._outbox.unrouted(BATCH)
        if not events:
            return 0
        channels = await self._outbox.channels()
        rules = [ch.rule(c) for c in channels]
        ids = [c.id for c in channels]
        told = await self._outbox.heard(ids, sorted({e.job_id for e in events}))
        routed = route([e.facts() for e in events], rules, told, now, await self._outbox.held(ids, now))
        wanted = {r.event_id for r in routed if r.outcome is Outcome.PENDING}  # worth a tick explanation
        heard = {r.event_id for r in routed}
        messages = {e.id: await self._guarded_message(e, now, e.id in wanted) for e in events if e.id in heard}
        written = await self._outbox.route(self._epoch(), events, routed, messages)
        kinds = {c.id: c.kind for c in channels}
        for r in routed:
            if r.outcome is Outcome.SUPPRESSED:
                metrics.NOTIFICATIONS.labels(kinds[r.channel_id], "suppressed").inc()
        log.info(
            "job events routed",
            extra={"event": "notify.routed", "events": len(events), "deliveries": written,
                   "suppressed": sum(r.outcome is Outcome.SUPPRESSED for r in routed)},
        )  # fmt: skip
        return len(events)

    async def _guarded_message(self, event: EventRow, now: datetime, explain: bool) -> dict[str, Any]:
        """The event's message, built on its own: one whose data breaks the building (or its
        encoding) gets the minimal message instead of failing the batch and, pass after pass,
        holding back every event after it."""
        try:
            message = await self._message(event, now, explain)
            msgspec.json.encode(message)  # what the outbox will store: fails here, not in the batch's write
            return message
        except _FATAL:
            raise
        except Exception:
            fields = {"event": "notify.minimal_message", "event_id": event.id, "job_id": event.job_id}
            log.warning("message not built; the minimal one is sent", exc_info=True, extra=fields)
            return msg.minimal(
                event={"id": event.id, "kind": event.kind, "occurred_at": event.occurred_at},
                job={"id": event.job_id, "name": event.job_name, "queue": event.queue},
            )

    async def _message(self, event: EventRow, now: datetime, explain: bool) -> dict[str, Any]:
        run = None
        if event.run_id is not None and event.run_state is not None:
            assert event.run_scheduled_for is not None and event.run_attempt is not None
            run = msg.RunFacts(id=event.run_id, state=event.run_state, scheduled_for=event.run_scheduled_for,
                               attempt=event.run_attempt, error=event.run_error)  # fmt: skip
        tick_facts = None
        tick = _tick_of(event)
        if explain and tick is not None:
            retention = self._settings.runs_retention_s
            kept_since = now - timedelta(seconds=retention) if retention else None
            try:
                tick_facts = await self._outbox.explain(event.job_id, tick, now, kept_since)
            except NotFound:  # the job went meanwhile
                tick_facts = None
            except _FATAL:
                raise
            except Exception:  # the explanation is a help, not the notification: sent without it
                log.warning("tick not explained", exc_info=True,
                            extra={"event": "notify.unexplained", "job_id": event.job_id})  # fmt: skip
                tick_facts = None
        return msg.build(
            event={"id": event.id, "kind": event.kind, "occurred_at": event.occurred_at, "detail": event.detail},
            job={"id": event.job_id, "name": event.job_name, "queue": event.queue},
            run=run,
            tick=tick_facts or None,
            link=msg.console_link(self._link_base, event.run_id, event.job_id),
        )

    # --- sender ---

    async def send_once(self) -> int:
        """Claim the due deliveries (one batch) and send them side by side; how many were claimed."""
        if not await self._outbox.any_due():
            return 0
        claimed = await self._outbox.claim(self._epoch(), BATCH, self._lease_s)
        if claimed:
            await asyncio.gather(*(self._deliver(one) for one in claimed))
        return len(claimed)

    async def _deliver(self, delivery: Claimed) -> None:
        channel, settings = delivery.channel, self._settings
        job, run = (part if isinstance(part := delivery.message.get(name), dict) else {} for name in ("job", "run"))
        fields = {"delivery_id": delivery.id, "channel": channel.name, "attempt": delivery.attempts,
                  "job_id": job.get("id"), "run_id": run.get("id")}  # fmt: skip
        with bind(**{k: v for k, v in fields.items() if v is not None}):
            assert self.http is not None
            error = None
            try:
                await send(channel, delivery.message, delivery.id, http=self.http,
                           allow=settings.http_allow_nets, timeout_s=settings.notify_timeout_s)  # fmt: skip
            except SendFailed as exc:
                error = _scrubbed(str(exc), channel)
            except _FATAL:
                raise
            except Exception as exc:  # noqa: BLE001 - a message or channel the sender cannot handle: a failed try
                # Only the type: an unexpected error's text may quote the channel's URL (a Slack secret).
                error = f"unexpected {type(exc).__name__} while sending"
            if error is not None:
                delay = Backoff(settings.notify_retry_base_s, settings.notify_retry_cap_s, delivery.attempts - 1)
                again = retry_at(delivery.attempts, settings.notify_max_attempts, datetime.now(UTC), delay.next_delay())
                await self._outbox.failed(self._epoch(), delivery.id, error, again)
                metrics.NOTIFICATIONS.labels(channel.kind, "retried" if again else "failed").inc()
                log.warning(
                    "notification not delivered: %s", error,
                    extra={"event": "notify.retry" if again else "notify.gave_up", "retry_at": again},
                )  # fmt: skip
                return
            await self._outbox.sent(self._epoch(), delivery.id)
            metrics.NOTIFICATIONS.labels(channel.kind, "sent").inc()
            log.info("notification delivered", extra={"event": "notify.sent", "kind": delivery.event_kind})
