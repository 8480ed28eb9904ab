"""Concurrency groups in the ledger: the slots a grouped job's runs need to start.

Every grant happens in a transaction that first locks the group rows (GROUPS_LOCK, name order):
the claim that takes a slot, and the release (a finish, the reaper's "executor lost", a claim
that refuses a woken run) that hands freed slots to the group's waiting runs. So two executors
cannot both take a group's last slot, and a release sees every wait committed before it: no lost
wakeup. What each group's slots go to is cronos.lifecycle.allot's decision over the facts read
under that lock (GROUP_FACTS); this module applies it with conditional statements. Runs of jobs
without a group never come here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronos import lifecycle
from cronos.lifecycle import Contender
from cronos.store.queries import groups as groups_q
from cronos.store.queries import runs as runs_q
from cronos.store.waiters import notify

WAITERS_READ = 64  # waiting runs of a group read per decision: a group frees at most its limit at once


@dataclass(frozen=True, slots=True)
class Asking:
    """A queued run of a grouped job that its job's own policy lets start."""

    run_id: int
    job_id: int
    scheduled_for: datetime
    group: str


Slot = tuple[str, int, datetime]  # a slot's group, job and tick


@dataclass
class Taken:
    claim: set[int] = field(default_factory=set)  # runs that hold a slot now: claim them
    wait: dict[int, str] = field(default_factory=dict)  # run -> the group it now waits for
    woken_jobs: list[int] = field(default_factory=list)
    sent: int = 0


@dataclass
class Facts:
    held: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # slots held per group
    waiters: dict[str, list[Contender]] = field(default_factory=lambda: defaultdict(list))  # tick order
    slots: dict[int, Slot] = field(default_factory=dict)  # a waiting run's slot, were it given one
    holders: set[int] = field(default_factory=set)  # of the runs asked about, those holding a slot


async def _facts(conn: Any, groups: Sequence[str], holders_of: Sequence[int]) -> Facts:
    facts = Facts()
    for row in await conn.fetch(groups_q.GROUP_FACTS, list(groups), WAITERS_READ, list(holders_of)):
        group = row["group_name"]
        if row["kind"] == "held":
            facts.held[group] = row["held"]
        elif row["kind"] == "waiter":
            facts.waiters[group].append(Contender(row["run_id"], row["scheduled_for"], waiting=True))
            facts.slots[row["run_id"]] = (group, row["job_id"], row["scheduled_for"])
        else:
            facts.holders.add(row["run_id"])
    return facts


async def _take_slots(conn: Any, slots: Mapping[int, Slot]) -> None:
    ids = sorted(slots)
    groups, jobs, ticks = (list(column) for column in zip(*(slots[i] for i in ids), strict=True))
    await conn.execute(groups_q.SLOTS_TAKE, ids, groups, jobs, ticks)


async def _wake(conn: Any, woken: Mapping[int, Slot]) -> list[int]:
    """Hand each woken run its slot and wake it (waiting -> queued); the leader is told."""
    if not woken:
        return []
    await _take_slots(conn, woken)
    jobs = sorted({r["job_id"] for r in await conn.fetch(runs_q.RUNS_WAKE, sorted(woken))})
    await notify(conn, [("woken", job) for job in jobs])
    return jobs


async def take(conn: Any, asking: Sequence[Asking]) -> Taken:
    """In the caller's transaction: which of `asking` start (a slot each, or the one they were
    woken with), which wait for their group (recorded waiting), and waiting runs woken when a
    slot is free for them first (tick order). The caller claims `claim` in the same transaction."""
    taken = Taken(sent=2)
    groups = sorted({a.group for a in asking})
    limits = {r["name"]: r["run_limit"] for r in await conn.fetch(groups_q.GROUPS_LOCK, groups)}
    facts = await _facts(conn, groups, [a.run_id for a in asking])
    contenders: dict[str, list[Contender]] = defaultdict(list)
    slots: dict[int, Slot] = {}
    for a in asking:
        if a.run_id in facts.holders or a.group not in limits:  # woken with its slot; a group gone
            taken.claim.add(a.run_id)
        else:
            contenders[a.group].append(Contender(a.run_id, a.scheduled_for))
            slots[a.run_id] = (a.group, a.job_id, a.scheduled_for)
    woken: dict[int, Slot] = {}
    for group, mine in contenders.items():
        decided = lifecycle.allot(limits[group], facts.held[group], [*mine, *facts.waiters[group]])
        taken.claim |= decided.claim
        taken.wait.update((run, group) for run in decided.wait)
        woken.update((run, facts.slots[run]) for run in decided.wake)
    new = {run: slot for run, slot in slots.items() if run in taken.claim}
    if new:
        await _take_slots(conn, new)
        taken.sent += 1
    if taken.wait:
        ids = sorted(taken.wait)
        await conn.fetch(runs_q.RUNS_WAIT_GROUP, ids, [taken.wait[i] for i in ids])
        taken.sent += 1
    if woken:
        taken.woken_jobs = await _wake(conn, woken)
        taken.sent += 3
    return taken


async def release(conn: Any, run_ids: Sequence[int]) -> list[int]:
    """In the caller's transaction, after the runs `run_ids` ended (or were refused a start): free
    the slots they hold, and hand each group's free slots to its first waiting runs (tick order),
    waking them. Returns the jobs woken."""
    if not run_ids:
        return []
    limits = {r["name"]: r["run_limit"] for r in await conn.fetch(groups_q.GROUPS_LOCK_OF_RUNS, list(run_ids))}
    if not limits:
        return []
    await conn.fetch(groups_q.SLOTS_RELEASE, list(run_ids))
    return await hand_out(conn, limits)


async def hand_out(conn: Any, limits: Mapping[str, int]) -> list[int]:
    """Under the lock of the groups `limits` names: their free slots to their waiting runs."""
    facts = await _facts(conn, sorted(limits), [])
    woken: dict[int, Slot] = {}
    for group, limit in limits.items():
        decided = lifecycle.allot(limit, facts.held[group], facts.waiters[group])
        woken.update((run, facts.slots[run]) for run in decided.wake)
    return await _wake(conn, woken)


async def sweep(conn: Any) -> int:
    """The leader's safety net, in its fenced transaction: delete the slots of runs that ended
    without freeing them (replaced, expired, cancelled, their job deleted), and give the free
    slots of every group that has waiting runs to them. Returns the jobs woken."""
    await conn.fetch(groups_q.SLOTS_ORPHANED)
    groups = [r["waiting_for"] for r in await conn.fetch(groups_q.GROUPS_WAITED_FOR)]
    if not groups:
        return 0
    limits = {r["name"]: r["run_limit"] for r in await conn.fetch(groups_q.GROUPS_LOCK, sorted(groups))}
    return len(await hand_out(conn, limits))
