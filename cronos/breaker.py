"""The circuit breaker (issue 40): a job whose runs fail K times in a row pauses itself.

Pure: no clock, no I/O. The leader (dispatcher/breaker.py) gives it the facts the health evaluator
already keeps per job (cronos.health: the failures in a row, with no retry left, and the newest
success) and the breaker's own last trip; it adds nothing to the run path.

The failures that count are those since the later of the job's newest success and the last trip:
a job resumed by hand after a trip pauses again only after K more failures, not at the next one.

A job's own `expectations.breaker` overrides its queue's default (CRONOS_BREAKER_DEFAULTS), which
overrides the cluster's threshold (`threshold`), setting by setting, and may ask for a canary:
while the breaker holds the job paused, one run every M ticks of its schedule goes through
(`step`); the first that completes resumes the job. The breaker holds a job only as long as nobody
else touched it (`holds`): a pause, resume or edit by hand takes it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from cronos.models import Breaker, Expectations

# The pause note (stable text: the console and `cronos jobs get` show it).
NOTE = "paused by the circuit breaker after {count} failed runs in a row (threshold {threshold})"
CANARY_NOTE = "; a canary run every {every} ticks resumes it when one succeeds"
CANARY_SENT = "; a canary run let through for the tick at {tick}"
# The states a canary ends in (cronos.lifecycle.TERMINAL): completed resumes, the others re-arm.
ENDED = frozenset({"completed", "failed", "skipped", "cancelled"})

Step = Literal["wait", "canary", "resume", "rearm"]


@dataclass(frozen=True, slots=True)
class Trip:
    """The breaker's last trip of a job: when, and the streak it had then."""

    at: datetime
    streak: int


@dataclass(frozen=True, slots=True)
class Facts:
    status: str  # the job's
    streak: int  # its runs failed in a row, with no retry left (job_health.consecutive_failures)
    last_success_at: datetime | None
    last_trip: Trip | None = None


def counted(facts: Facts) -> int:
    """The failures in a row since the later of the newest success and the last trip."""
    trip = facts.last_trip
    if trip is None or (facts.last_success_at is not None and facts.last_success_at > trip.at):
        return facts.streak
    return max(facts.streak - trip.streak, 0)


def trips(facts: Facts, threshold: int) -> bool:
    """Whether the breaker pauses the job now: it is active and failed `threshold` times in a row
    (counted as above). A threshold of 0 is no breaker."""
    return threshold > 0 and facts.status == "active" and counted(facts) >= threshold


def note(facts: Facts, threshold: int) -> str:
    return NOTE.format(count=counted(facts), threshold=threshold)


# A queue's default breaker (CRONOS_BREAKER_DEFAULTS): (queue, its Breaker), for the jobs of the queue.
QueueDefaults = tuple[tuple[str, Breaker], ...]
NO_DEFAULTS: QueueDefaults = ()


def parse_defaults(raw: str) -> QueueDefaults:
    """`etl=3:5,reports=2`: queue=failures[:canary_every], comma-separated; ValueError naming the bad
    entry (a queue named twice, a count out of 0..10000)."""
    found: dict[str, Breaker] = {}
    for entry in filter(None, (part.strip() for part in raw.split(","))):
        queue, sep, value = entry.partition("=")
        failures, colon, every = value.partition(":")
        counts = [failures, every] if colon else [failures]
        if not (sep and queue.strip() and all(c.isascii() and c.isdigit() and len(c) <= 5 for c in counts)):
            raise ValueError(f"{entry!r}: each entry must be queue=failures[:canary_every] (e.g. etl=3:5)")
        if any(int(c) > 10_000 for c in counts):
            raise ValueError(f"{entry!r}: failures and canary_every must be 0..10000")
        if (name := queue.strip()) in found:
            raise ValueError(f"queue {name!r} must be named once")
        found[name] = Breaker(failures=int(failures), canary_every=int(every) if every else None)
    return tuple(found.items())


def setting(expectations: Expectations | None, queue_default: Breaker | None = None) -> Breaker:
    """The job's breaker: each of its own settings, else its queue's default's (CRONOS_BREAKER_DEFAULTS;
    each None: the cluster's)."""
    own = Breaker() if expectations is None or expectations.breaker is None else expectations.breaker
    if queue_default is None:
        return own
    return Breaker(
        failures=queue_default.failures if own.failures is None else own.failures,
        canary_every=queue_default.canary_every if own.canary_every is None else own.canary_every,
    )


def of_queue(defaults: QueueDefaults, queue: str) -> Breaker | None:
    """The queue's default breaker (None: it has none)."""
    return next((b for name, b in defaults if name == queue), None)


def threshold(expectations: Expectations | None, default: int, queue_default: Breaker | None = None) -> int:
    """The failures in a row that pause the job: its own, else its queue's, else the cluster's (0: never)."""
    found = setting(expectations, queue_default).failures
    return default if found is None else found


def canary_every(expectations: Expectations | None, queue_default: Breaker | None = None) -> int:
    """Every how many ticks a canary runs while the breaker holds the job (0: none)."""
    return setting(expectations, queue_default).canary_every or 0


def effective(expectations: Expectations | None, queue: str, default: int, defaults: QueueDefaults) -> Breaker:
    """The breaker that applies to a job, every setting filled (GET /api/jobs/{id} shows it)."""
    queue_default = of_queue(defaults, queue)
    return Breaker(
        failures=threshold(expectations, default, queue_default),
        canary_every=canary_every(expectations, queue_default),
    )


def holds(status: str, revision: int, held_revision: int | None) -> bool:
    """The breaker still holds the job: it is paused as the breaker's last step left it (a pause,
    resume or edit by anyone else bumped its revision and took it back)."""
    return status == "paused" and held_revision is not None and revision == held_revision


@dataclass(frozen=True, slots=True)
class Hold:
    """A job the breaker holds: its canary setting, its ticks since the trip or the last canary's
    tick (counted up to `every`), and the state of the canary in flight (None: none; "gone": its
    run was deleted)."""

    every: int
    ticks_since: int
    canary_state: str | None = None
    # The health evaluator counted the canary's success (job_health.last_success_at at or after
    # its end): until then the streak it keeps is the one before, and would trip the job again.
    success_counted: bool = False


def step(hold: Hold) -> Step:
    """What the breaker does with a job it holds: resume it after a canary completed (once the
    health evaluator counted it), re-arm (count M ticks afresh from the canary's tick) after one
    that ended otherwise, let a canary through after M ticks, or wait."""
    if hold.canary_state is not None:
        if hold.canary_state == "completed":
            return "resume" if hold.success_counted else "wait"
        return "rearm" if hold.canary_state in ENDED or hold.canary_state == "gone" else "wait"
    return "canary" if hold.every > 0 and hold.ticks_since >= hold.every else "wait"


def pause_note(facts: Facts, threshold: int, every: int) -> str:
    """The note of the trip, saying when a canary will run."""
    return note(facts, threshold) + (CANARY_NOTE.format(every=every) if every > 0 else "")


def canary_note(current: str | None, tick: datetime) -> str:
    """The pause note once a canary went through for `tick` (the trip's note kept before it)."""
    kept = (current or "").split(CANARY_SENT.split("{")[0])[0]
    return kept + CANARY_SENT.format(tick=tick.isoformat())
