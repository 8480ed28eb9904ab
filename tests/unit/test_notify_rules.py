"""cronos.notify.rules and cronos.notify.message: pure decisions and texts, a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from cronos.notify import message as msg
from cronos.notify.rules import (
    EventFacts,
    Heard,
    Outcome,
    QuietHours,
    Rule,
    applies,
    decide,
    quiet_until,
    retry_at,
    route,
)  # fmt: skip
from cronos.selectors import parse

T0 = datetime(2030, 3, 1, 12, 0, tzinfo=UTC)
FAILING = Heard(T0 - timedelta(hours=1), failing=True)  # the channel was told of a failure


def _event(kind: str = "failed", *, job: int = 1, queue: str = "default", at: datetime = T0, n: int | None = None,
           id: int = 1) -> EventFacts:  # fmt: skip
    return EventFacts(id, job, queue, kind, at, {} if n is None else {"consecutive_failures": n})


def test_scope_every_job_listed_jobs_listed_queues_and_kinds() -> None:
    assert applies(Rule(1), _event())
    assert not applies(Rule(1), _event("late_start"))  # not among the default kinds
    assert applies(Rule(1, job_ids=frozenset({1})), _event(job=1))
    assert not applies(Rule(1, job_ids=frozenset({2})), _event(job=1))
    assert applies(Rule(1, queues=frozenset({"reports"})), _event(queue="reports"))
    assert not applies(Rule(1, queues=frozenset({"reports"})), _event(queue="default"))
    assert applies(Rule(1, job_ids=frozenset({9}), queues=frozenset({"reports"})), _event(job=1, queue="reports"))
    assert not applies(Rule(1, enabled=False), _event())


def test_a_selector_adds_the_jobs_whose_labels_match() -> None:
    data = parse("team=data,env!=dev")
    prod = EventFacts(1, 1, "default", "failed", T0, {}, {"team": "data", "env": "prod"})
    dev = EventFacts(2, 2, "default", "failed", T0, {}, {"team": "data", "env": "dev"})
    web = EventFacts(3, 3, "reports", "failed", T0, {}, {"team": "web"})
    assert applies(Rule(1, selector=data), prod)
    assert not applies(Rule(1, selector=data), dev) and not applies(Rule(1, selector=data), web)
    assert not applies(Rule(1, selector=data), _event())  # a job without labels
    both = Rule(1, queues=frozenset({"reports"}), selector=data)  # either scope: the union
    assert [applies(both, e) for e in (prod, dev, web)] == [True, False, True]
    assert [r.event_id for r in route([prod, dev, web], [Rule(1, selector=data)], {}, T0)] == [1]


def test_after_n_failures_and_recovery_only_past_the_threshold() -> None:
    rule = Rule(1, after_failures=3, events=frozenset({"failed", "recovered"}))
    assert decide(rule, _event(n=2), Heard(), T0)[0] is Outcome.SUPPRESSED
    assert decide(rule, _event(n=3), Heard(), T0)[0] is Outcome.PENDING
    assert decide(rule, _event(), Heard(), T0)[2] == "below the failure threshold (1 of 3 in a row)"  # no count: 1
    assert decide(rule, _event("recovered", n=2), Heard(), T0)[0] is Outcome.SUPPRESSED
    assert decide(rule, _event("recovered", n=5), FAILING, T0)[0] is Outcome.PENDING
    # The health evaluator's recovered event names the streak it ends `after_failures`.
    ended = [EventFacts(1, 1, "default", "recovered", T0, {"after_failures": n}) for n in (2, 3)]
    assert [decide(rule, event, FAILING, T0)[0] for event in ended] == [Outcome.SUPPRESSED, Outcome.PENDING]
    assert "the failures it ends (2)" in str(decide(rule, ended[0], FAILING, T0)[2])


def test_rate_limit_per_job_counts_the_batch_and_lets_a_recovery_through() -> None:
    rule = Rule(1, rate_limit_s=600, events=frozenset({"failed", "recovered"}))
    events = [
        _event(id=1, at=T0), _event(id=2, at=T0 + timedelta(minutes=5)), _event(id=3, job=2, at=T0),
        _event(id=4, at=T0 + timedelta(minutes=11)), _event("recovered", id=5, at=T0 + timedelta(minutes=12)),
    ]  # fmt: skip
    outcomes = {r.event_id: r.outcome for r in route(events, [rule], {}, T0)}
    assert outcomes == {1: Outcome.PENDING, 2: Outcome.SUPPRESSED, 3: Outcome.PENDING, 4: Outcome.PENDING,
                        5: Outcome.PENDING}  # fmt: skip
    earlier = {(1, 1): Heard(T0 - timedelta(minutes=1))}  # notified before this batch
    assert route([_event(id=1)], [rule], earlier, T0)[0].outcome is Outcome.SUPPRESSED


def test_a_recovery_is_news_only_of_a_failure_the_channel_heard() -> None:
    # A job alternating failure and success once got a "recovered" through the rate limit each time.
    rule = Rule(1, rate_limit_s=3600, events=frozenset({"failed", "recovered"}))
    events = [_event("failed" if n % 2 == 0 else "recovered", id=n + 1, at=T0 + timedelta(minutes=n)) for n in range(8)]
    routed = route(events, [rule], {}, T0)
    assert [r.event_id for r in routed if r.outcome is Outcome.PENDING] == [1, 2]  # one failure, its recovery
    assert {r.reason for r in routed[2:]} == {
        "the channel was not told of the failures it ends",
        f"rate limited: this job was notified at {(T0 + timedelta(minutes=1)).isoformat()} (at most one per 3600 s)",
    }
    # Told of a failure before this batch: its recovery is news; told it recovered already: not.
    assert route([events[1]], [rule], {(1, 1): FAILING}, T0)[0].outcome is Outcome.PENDING
    assert route([events[1]], [rule], {(1, 1): Heard(T0, failing=False)}, T0)[0].outcome is Outcome.SUPPRESSED
    # A failure the channel never heard (below its threshold) ends without a word.
    third = Rule(1, after_failures=3, events=frozenset({"failed", "recovered"}))
    assert decide(third, _event("recovered", n=3), Heard(), T0)[0] is Outcome.SUPPRESSED


@pytest.mark.parametrize(
    ("start", "end", "now", "until"),
    [
        ("22:00", "07:00", datetime(2030, 3, 1, 23, 30, tzinfo=UTC), datetime(2030, 3, 2, 7, 0, tzinfo=UTC)),
        ("22:00", "07:00", datetime(2030, 3, 2, 6, 59, tzinfo=UTC), datetime(2030, 3, 2, 7, 0, tzinfo=UTC)),
        ("22:00", "07:00", datetime(2030, 3, 2, 7, 0, tzinfo=UTC), None),
        ("12:00", "13:00", datetime(2030, 3, 2, 12, 30, tzinfo=UTC), datetime(2030, 3, 2, 13, 0, tzinfo=UTC)),
        ("12:00", "13:00", datetime(2030, 3, 2, 11, 59, tzinfo=UTC), None),
        ("12:00", "12:00", datetime(2030, 3, 2, 12, 0, tzinfo=UTC), None),
    ],
)
def test_quiet_hours_end(start: str, end: str, now: datetime, until: datetime | None) -> None:
    quiet = QuietHours(time.fromisoformat(start), time.fromisoformat(end))
    assert quiet_until(quiet, now) == until


def test_quiet_hours_follow_their_time_zone_across_dst() -> None:
    # Europe/Paris springs forward on 2030-03-31: 22:00-07:00 local ends at 05:00 UTC that morning.
    quiet = QuietHours(time(22), time(7), "Europe/Paris")
    assert quiet_until(quiet, datetime(2030, 3, 30, 21, 30, tzinfo=UTC)) == datetime(2030, 3, 31, 5, 0, tzinfo=UTC)
    assert quiet_until(quiet, datetime(2030, 3, 30, 20, 30, tzinfo=UTC)) is None  # 21:30 in Paris


def test_quiet_hours_hold_or_drop() -> None:
    quiet = QuietHours(time(0), time(23, 59))
    held = decide(Rule(1, quiet_hours=quiet), _event(), Heard(), T0)
    assert held == (Outcome.PENDING, datetime(2030, 3, 1, 23, 59, tzinfo=UTC), None)
    dropped = decide(Rule(1, quiet_hours=QuietHours(time(0), time(23, 59), hold=False)), _event(), Heard(), T0)
    assert dropped[0] is Outcome.SUPPRESSED and "quiet hours" in str(dropped[2])


def test_what_quiet_hours_held_is_released_paced() -> None:
    end = datetime(2030, 3, 1, 23, 59, tzinfo=UTC)
    quiet = Rule(1, quiet_hours=QuietHours(time(0), time(23, 59)))
    loud = Rule(2)
    events = [_event(id=n, job=n) for n in range(1, 5)]
    due = {(r.channel_id, r.event_id): r.due_at for r in route(events, [quiet, loud], {}, T0)}
    assert [due[1, n] for n in range(1, 5)] == [end + timedelta(seconds=n) for n in range(4)]  # once a second
    assert {due[2, n] for n in range(1, 5)} == {T0}  # a channel without quiet hours: at once
    # Held before this batch: the next is a pace after the latest; one due before the end does not count.
    assert route(events[:1], [quiet], {}, T0, {1: end + timedelta(seconds=7)})[0].due_at == end + timedelta(seconds=8)
    assert route(events[:1], [quiet], {}, T0, {1: end - timedelta(hours=1)})[0].due_at == end


def test_retries_until_the_bound() -> None:
    assert retry_at(1, 3, T0, 5.0) == T0 + timedelta(seconds=5)
    assert retry_at(3, 3, T0, 5.0) is None


def test_messages_read_well_in_every_form() -> None:
    run = msg.RunFacts(id=7, state="failed", scheduled_for=T0, attempt=2, error="x" * 900)
    message = msg.build(
        event={"id": 3, "kind": "failed", "occurred_at": T0, "detail": {"consecutive_failures": 4}},
        job={"id": 1, "name": "backup", "queue": "default"}, run=run,
        tick={"scheduled_for": T0, "outcome": "ran", "reason": None, "revision": 2, "cron_expression": "0 12 * * *",
              "timezone": "UTC", "runs": []},
        link=msg.console_link("https://c.example/", 7, 1),
    )  # fmt: skip
    assert message["type"] == "job.failed" and len(message["run"]["error"]) == msg.ERROR_EXCERPT_CHARS
    assert message["link"] == "https://c.example/#/runs/7"
    text = msg.slack_text(message)
    assert text.splitlines()[0] == "*backup failed*"
    assert "Run 7 (attempt 2) of the tick 2030-03-01T12:00:00Z: failed" in text
    assert "Consecutive failures: 4" in text and "revision 2: ran" in text
    subject, body = msg.email(message)
    assert subject == "[Cronos] backup failed" and body.startswith("backup failed.\n")
    assert "Tick 2030-03-01T12:00:00Z of `0 12 * * *` (UTC), revision 2: ran" in body
    assert msg.console_link("", 7, 1) is None and msg.console_link("http://h", None, 1) == "http://h/#/jobs/1"


@pytest.mark.parametrize(
    ("schedule", "shown"),
    [({"every": "2s", "cron_expression": ""}, "of every 2s,"), ({"cron_expression": ""}, "of a one-off,")],
)
def test_a_tick_of_an_interval_or_a_one_off_names_its_schedule(schedule: dict[str, str], shown: str) -> None:
    """Probed: an interval job's failure read "Tick ... of `` (UTC)" (its tick has no expression)."""
    tick = {"scheduled_for": T0, "outcome": "ran", "reason": None, "revision": 1, "timezone": "UTC", **schedule}
    message = msg.build(event={"id": 3, "kind": "failed", "occurred_at": T0, "detail": {}},
                        job={"id": 1, "name": "j", "queue": "default"}, run=None, tick=tick, link=None)  # fmt: skip
    for text in (msg.slack_text(message), msg.email(message)[1]):
        assert f"Tick 2030-03-01T12:00:00Z {shown} revision 1: ran" in text and "``" not in text
