"""Bounded history, on the leader: `runs` is partitioned by scheduled_for, a partition per UTC
day (migration 0009). Every pass creates the partitions of today and the next AHEAD_DAYS
days, drops each partition whose every tick is older than CRONOS_RUNS_RETENTION (never one
that still holds a queued or running run: it is kept and tried again next pass), and
deletes the default partition's runs past retention.

A whole day goes at once, so history is kept between the retention and one day more.
Dropping a partition is a catalog change, not a delete: no dead rows, no vacuum, the disk
space back at once. `plan` is pure (partitions and `now` in, changes out); `run` is the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import msgspec

from cronos.errors import BackendUnavailable, NotLeader
from cronos.store.partitions import Change, Partition, PartitionStore
from dispatcher.election import Election, LeadershipLost
from dispatcher.lifetime import Lifetime

log = logging.getLogger("dispatcher.retention")

DAY = timedelta(days=1)
AHEAD_DAYS = 3  # tomorrow and two more: a leaderless weekend still finds its days
INTERVAL_S = 600.0


class NewDay(msgspec.Struct, frozen=True):
    name: str
    lower: datetime
    upper: datetime


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    create: list[NewDay]
    drop: list[str]
    purge_before: datetime | None  # the default partition's runs before this go; None: keep all


def day_name(day: datetime) -> str:
    return f"runs_{day:%Y%m%d}"


def plan(partitions: Sequence[Partition], now: datetime, retention_s: float) -> Plan:
    """The changes that bring the partitions to: every day from today through AHEAD_DAYS ahead
    covered, none wholly older than `now - retention_s` (0: keep all)."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    ranges = [(p.lower, p.upper) for p in partitions if not p.is_default and p.upper is not None]
    create = []
    for n in range(AHEAD_DAYS + 1):
        lower = today + n * DAY
        if not any((lo is None or lo < lower + DAY) and hi > lower for lo, hi in ranges):
            create.append(NewDay(day_name(lower), lower, lower + DAY))
    if retention_s <= 0:
        return Plan(create=create, drop=[], purge_before=None)
    horizon = now - timedelta(seconds=retention_s)
    drop = [p.name for p in partitions if not p.is_default and p.upper is not None and p.upper <= horizon]
    return Plan(create=create, drop=drop, purge_before=horizon)


# What ends a pass (and the term); any other failure of one change is logged and the pass goes on.
_FATAL = (BackendUnavailable, NotLeader, LeadershipLost)


def _failure(change: str, name: str, exc: Exception) -> dict[str, str]:
    return {
        "event": "runs.partition_failed",
        "change": change,
        "partition": name,
        "error": f"{type(exc).__name__}: {exc}",
    }


async def once(store: PartitionStore, epoch: int, now: datetime, retention_s: float) -> Plan:
    """One pass; returns what it set out to do (each change logs its outcome)."""
    todo = plan(await store.list(), now, retention_s)
    for day in todo.create:
        try:
            outcome, moved = await store.create(epoch, day.name, day.lower, day.upper)
        except _FATAL:
            raise
        except Exception as exc:
            log.warning("runs partition change failed", exc_info=True, extra=_failure("create", day.name, exc))
            continue
        log.log(
            logging.INFO if outcome is Change.DONE else logging.WARNING,
            "runs partition created" if outcome is Change.DONE else "runs partition not created yet",
            extra={"event": f"runs.partition_create_{outcome}", "partition": day.name, "moved": moved, "epoch": epoch},
        )
    for name in todo.drop:
        try:
            outcome = await store.drop(epoch, name)
        except _FATAL:
            raise
        except Exception as exc:
            log.warning("runs partition change failed", exc_info=True, extra=_failure("drop", name, exc))
            continue
        log.log(
            logging.INFO if outcome is Change.DONE else logging.WARNING,
            "runs partition dropped" if outcome is Change.DONE else "runs partition past retention kept",
            extra={"event": f"runs.partition_drop_{outcome}", "partition": name, "epoch": epoch},
        )
    if todo.purge_before is not None:
        purged = await store.purge_default(epoch, todo.purge_before)
        if purged:
            log.info("default partition purged", extra={"event": "runs.default_purged", "runs": purged, "epoch": epoch})
    return todo


async def run(term: Lifetime, store: PartitionStore, election: Election, retention_s: float) -> None:
    """A pass at the start of the term, then every INTERVAL_S. A pass that fails for another
    reason than a lost backend or leadership is logged and tried again: history upkeep never
    takes the leader down."""
    while True:
        try:
            await once(store, election.check(), datetime.now(UTC), retention_s)
        except _FATAL:
            raise
        except Exception as exc:
            log.warning(
                "runs retention pass failed",
                exc_info=True,
                extra={"event": "runs.retention_failed", "error": f"{type(exc).__name__}: {exc}"},
            )
        await term.sleep(INTERVAL_S)
