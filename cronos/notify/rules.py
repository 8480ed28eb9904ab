"""Which channel is told of which job event, and when: pure decisions over facts.

A channel applies to every job of its namespace, or to the jobs it lists, the jobs of the queues it
lists and the jobs whose labels match its selector (cronos.selectors), all in its namespace, and
hears only the event kinds it names.
Its rule then decides, per (event, channel):

- `after_failures` N: a `failed` event is sent only once the job failed N times in a row (the
  event's `detail.consecutive_failures`, 1 when absent); a `recovered` event only when the run of
  failures it ends had reached N.
- A `recovered` event is sent only when the channel was told the job was failing: the last of the
  job's `failed`/`recovered` notifications it heard is a `failed` one. So a channel never hears
  "recovered" of a failure it never heard of (one below its threshold, rate limited, dropped in
  quiet hours), and a job alternating failure and success cannot slip past the rate limit on
  recoveries.
- `rate_limit_s`: at most one notification per job per interval (by the events' `occurred_at`),
  counting what the channel heard (pending or sent; not suppressed, not given up); a `recovered`
  event the channel may hear passes, so the last word it hears about a job is not "failing".
- `quiet_hours`: between `start` and `end` (wall clock in its time zone; may wrap midnight) a
  notification is held until `end` (`hold`, the default), or dropped (`hold: false`). What was
  held is released paced, one every RELEASE_PACE_S per channel from `end` on, not in one burst
  (Slack's incoming webhooks take about one message a second).

Suppressed notifications are recorded with their reason (the operator sees why nothing came).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from cronos.events import JobEventKind
from cronos.selectors import Requirement, matches

EVENT_KINDS: tuple[str, ...] = tuple(str(kind) for kind in JobEventKind)
DEFAULT_EVENTS: tuple[str, ...] = ("failed", "recovered", "missed")
RELEASE_PACE_S = 1.0  # held notifications of one channel leave this far apart when quiet hours end


class Outcome(StrEnum):
    PENDING = "pending"  # to send at `due_at`
    SUPPRESSED = "suppressed"  # recorded with its reason, never sent


# Why a notification was not sent (stable strings, shown with the delivery).
BELOW_THRESHOLD = "below the failure threshold ({count} of {needed} in a row)"
RECOVERY_BELOW = "the failures it ends ({count}) never reached the threshold ({needed})"
RECOVERY_UNTOLD = "the channel was not told of the failures it ends"
RATE_LIMITED = "rate limited: this job was notified at {last} (at most one per {seconds} s)"
QUIET_DROPPED = "quiet hours ({start}-{end} {zone})"


@dataclass(frozen=True, slots=True)
class QuietHours:
    start: time
    end: time
    timezone: str = "UTC"
    hold: bool = True  # True: held until `end`; False: dropped


@dataclass(frozen=True, slots=True)
class Rule:
    """A channel as the router sees it."""

    channel_id: int
    job_ids: frozenset[int] | None = None
    queues: frozenset[str] | None = None
    selector: tuple[Requirement, ...] | None = None  # parsed once, when the channel is read
    events: frozenset[str] = frozenset(DEFAULT_EVENTS)
    after_failures: int = 1
    rate_limit_s: int = 0
    quiet_hours: QuietHours | None = None
    enabled: bool = True
    namespace: str = "default"  # it hears only of the jobs of its namespace (issue 41)


@dataclass(frozen=True, slots=True)
class EventFacts:
    """An unrouted job event with what the rules need of its job."""

    id: int
    job_id: int
    queue: str
    kind: str
    occurred_at: datetime
    detail: Mapping[str, Any] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)  # its job's, for a channel's selector
    namespace: str = "default"  # its job's


@dataclass(frozen=True, slots=True)
class Heard:
    """What a channel heard of a job (pending or sent notifications): the last one's event time,
    and whether the last `failed`/`recovered` of them was a `failed`."""

    at: datetime | None = None
    failing: bool = False

    def after(self, kind: str, occurred_at: datetime) -> Heard:
        """What the channel has heard once told of this event too."""
        at = occurred_at if self.at is None else max(self.at, occurred_at)
        failing = kind == JobEventKind.FAILED if kind in _FAILURE_KINDS else self.failing
        return Heard(at, failing)


_FAILURE_KINDS = frozenset({JobEventKind.FAILED, JobEventKind.RECOVERED})


@dataclass(frozen=True, slots=True)
class Routed:
    event_id: int
    channel_id: int
    outcome: Outcome
    due_at: datetime
    reason: str | None = None


def applies(rule: Rule, event: EventFacts) -> bool:
    """Whether the channel hears of this event at all (its scope and kinds)."""
    if not rule.enabled or event.kind not in rule.events or event.namespace != rule.namespace:
        return False
    if rule.job_ids is not None and event.job_id in rule.job_ids:
        return True
    if rule.queues is not None and event.queue in rule.queues:
        return True
    if rule.selector is not None and matches(rule.selector, event.labels):
        return True
    return rule.job_ids is None and rule.queues is None and rule.selector is None


def _count(detail: Mapping[str, Any], kind: str = JobEventKind.FAILED) -> int:
    """Failures in a row: a `failed` event's so far, a `recovered` event's that it ends (the health
    evaluator names it `after_failures`); 1 when the detail does not say."""
    names = ("after_failures", "consecutive_failures") if kind == JobEventKind.RECOVERED else ("consecutive_failures",)
    for name in names:
        value = detail.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 1


def quiet_until(quiet: QuietHours, now: datetime) -> datetime | None:
    """The end of the quiet hours `now` falls in (UTC), or None when `now` is not in them."""
    zone = ZoneInfo(quiet.timezone)
    local = now.astimezone(zone)
    at = local.time().replace(tzinfo=None)
    if quiet.start == quiet.end:
        return None  # an empty window
    if quiet.start < quiet.end:
        inside = quiet.start <= at < quiet.end
        end_day = local.date()
    else:  # wraps midnight: 22:00-07:00
        inside = at >= quiet.start or at < quiet.end
        end_day = local.date() + timedelta(days=1) if at >= quiet.start else local.date()
    if not inside:
        return None
    end = datetime.combine(end_day, quiet.end, tzinfo=zone)
    return max(end.astimezone(UTC), now)


def decide(rule: Rule, event: EventFacts, heard: Heard, now: datetime) -> tuple[Outcome, datetime, str | None]:
    """The outcome for an event the channel hears of: send when (due_at), or suppressed and why."""
    needed = rule.after_failures
    if event.kind == JobEventKind.FAILED and _count(event.detail) < needed:
        return Outcome.SUPPRESSED, now, BELOW_THRESHOLD.format(count=_count(event.detail), needed=needed)
    if event.kind == JobEventKind.RECOVERED:
        if needed > 1 and (ended := _count(event.detail, event.kind)) < needed:
            return Outcome.SUPPRESSED, now, RECOVERY_BELOW.format(count=ended, needed=needed)
        if not heard.failing:
            return Outcome.SUPPRESSED, now, RECOVERY_UNTOLD
    last = heard.at
    if (
        rule.rate_limit_s > 0
        and event.kind != JobEventKind.RECOVERED
        and last is not None
        and event.occurred_at - last < timedelta(seconds=rule.rate_limit_s)
    ):
        return Outcome.SUPPRESSED, now, RATE_LIMITED.format(last=last.isoformat(), seconds=rule.rate_limit_s)
    quiet = rule.quiet_hours
    if quiet is not None and (end := quiet_until(quiet, now)) is not None:
        if not quiet.hold:
            return Outcome.SUPPRESSED, now, QUIET_DROPPED.format(start=quiet.start, end=quiet.end, zone=quiet.timezone)
        return Outcome.PENDING, end, None
    return Outcome.PENDING, now, None


def release_at(end: datetime, last_held: datetime | None) -> datetime:
    """When a notification held until `end` is sent: at `end`, or a pace after the channel's last
    held one when that one is not due before `end`."""
    if last_held is None or last_held < end:
        return end
    return last_held + timedelta(seconds=RELEASE_PACE_S)


def route(
    events: Sequence[EventFacts],
    rules: Iterable[Rule],
    heard: Mapping[tuple[int, int], Heard],
    now: datetime,
    held: Mapping[int, datetime] | None = None,
) -> list[Routed]:
    """Every (event, channel) pair the channels hear of, in event order, with its outcome.
    `heard`: (channel id, job id) -> what the channel heard of the job before this batch; the
    events of this batch count too, in order. `held`: channel id -> the latest release time of
    its notifications held by quiet hours (not yet tried)."""
    rules = list(rules)
    told = dict(heard)
    last_held = dict(held or {})
    out: list[Routed] = []
    for event in sorted(events, key=lambda e: (e.occurred_at, e.id)):
        for rule in rules:
            if not applies(rule, event):
                continue
            key = (rule.channel_id, event.job_id)
            outcome, due_at, reason = decide(rule, event, told.get(key, Heard()), now)
            if outcome is Outcome.PENDING and due_at > now:  # held by quiet hours: paced out
                due_at = last_held[rule.channel_id] = release_at(due_at, last_held.get(rule.channel_id))
            if outcome is Outcome.PENDING:
                told[key] = told.get(key, Heard()).after(event.kind, event.occurred_at)
            out.append(Routed(event.id, rule.channel_id, outcome, due_at, reason))
    return out


def retry_at(attempts: int, max_attempts: int, now: datetime, delay_s: float) -> datetime | None:
    """When to try a send that failed again (`delay_s` from cronos.backoff); None: the delivery
    has had its `max_attempts` and ends `failed`."""
    if attempts >= max_attempts:
        return None
    return now + timedelta(seconds=delay_s)
