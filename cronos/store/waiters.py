"""Waiting runs: woken when the run ahead of them ends (by the finisher, cronos.store.finishes), and
the leader's sweep, the safety net for a wait no end will answer.

The sweep reads the job's waiting runs with the facts cronos.lifecycle.overlap decides on: a run
whose forbid wait ran out while its predecessor still runs ends skipped; a waiting run with nothing
running ahead of it (the run it waited for, or the one woken before it, ended by another path: an
expiry, a misfire) is woken once the sweep saw it so twice in a row, so a wake on its way is not
doubled.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence, Set
from datetime import UTC, datetime
from typing import Any

import msgspec

from cronos import lifecycle
from cronos.lifecycle import OVERLAP_REASONS, Ahead, Candidate, Overlap
from cronos.models import SKIP_OVERLAP
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import runs as runs_q

WAITERS_PER_JOB = 8  # waiting runs of one job a finish looks at: skips those whose wait ran out, wakes the first
SWEEP_LIMIT = 5000


class SweepResult(msgspec.Struct, kw_only=True):
    skipped: int = 0
    woken: int = 0
    stranded: frozenset[int] = frozenset()  # waiting runs with nothing ahead: woken if still so next time


async def wake_behind(conn: Any, waiters: dict[int, list[Any]], ahead: dict[int, Ahead], now: datetime) -> list[int]:
    """For each job whose run `ahead[job]` just ended: its waiting runs (`waiters`, tick order),
    each skipped if its forbid wait ran out, the first that may run woken. The woken runs' jobs."""
    wake: list[int] = []
    skip: list[int] = []
    for job_id, runs in waiters.items():
        for w in runs:
            candidate = Candidate(w["policy"], w["scheduled_for"], w["attempt"], w["due_at"])
            ended = ahead.get(job_id)
            if ended is not None:
                on_time = lifecycle.on_time_at(job_id, ended.scheduled_for, w["jitter_s"])
                ended = Ahead(ended.scheduled_for, ended.started_at, ended.attempt, on_time)
            if ended is not None and lifecycle.after_wait(candidate, ended, now) is Overlap.SKIP:
                skip.append(w["run_id"])
                continue
            wake.append(w["run_id"])
            break
    if skip:
        await conn.fetch(runs_q.RUNS_SKIP, skip, SKIP_OVERLAP)
    if not wake:
        return []
    return sorted({r["job_id"] for r in await conn.fetch(runs_q.RUNS_WAKE, wake)})


async def wake_free(conn: Any, job_ids: Sequence[int]) -> list[int]:
    """Of these jobs (whose runs were just recorded waiting), those with no run running now get
    their first waiting run woken, and the leader told; the jobs woken. The read of what runs
    locks each job's runs_running_exclusive row FOR SHARE, so it waits for a finish (which deletes
    that row) to commit: a finish that ran before the wait was recorded cannot be missed."""
    if not job_ids:
        return []
    running = {r["job_id"] for r in await conn.fetch(runs_q.RUNNING_JOBS_LOCKED, list(job_ids))}
    free = [job for job in job_ids if job not in running]
    if not free:
        return []
    heads: dict[int, list[Any]] = {}
    for row in await conn.fetch(runs_q.FOLLOW_UP_FACTS, [], free, 1):
        heads.setdefault(row["job_id"], []).append(row)
    woken = await wake_behind(conn, heads, {}, datetime.now(UTC))
    await notify(conn, [("woken", job) for job in woken])
    return woken


def _ahead(row: Any) -> Ahead | None:
    if row["ahead_started_at"] is None:
        return None
    tick = row["ahead_scheduled_for"]
    on_time = lifecycle.on_time_at(row["job_id"], tick, row["jitter_s"])
    return Ahead(tick, row["ahead_started_at"], row["ahead_attempt"], on_time)


async def sweep(conn: Any, seen_stranded: Set[int]) -> SweepResult:
    """In the leader's fenced transaction: decide every waiting run again (see the module)."""
    skip: dict[str, list[int]] = {}
    wake: list[int] = []
    stranded: set[int] = set()
    for row in await conn.fetch(runs_q.WAITERS_SWEEP, SWEEP_LIMIT):
        ahead = _ahead(row)
        if ahead is None:
            if row["earlier"] == 0:
                if row["run_id"] in seen_stranded:
                    wake.append(row["run_id"])
                else:
                    stranded.add(row["run_id"])
            continue
        candidate = Candidate(row["policy"], row["scheduled_for"], row["attempt"], row["due_at"], ahead, row["earlier"])
        decision = lifecycle.overlap(candidate, row["now"])
        if decision in OVERLAP_REASONS:
            skip.setdefault(OVERLAP_REASONS[decision], []).append(row["run_id"])
        elif decision is Overlap.CLAIM:  # its job allows overlap now
            wake.append(row["run_id"])
    result = SweepResult(stranded=frozenset(stranded))
    for reason, ids in skip.items():
        result.skipped += len(await conn.fetch(runs_q.RUNS_SKIP, ids, reason))
    if wake:
        result.woken = len(await conn.fetch(runs_q.RUNS_WAKE, wake))
    return result


async def notify(conn: Any, ops: Collection[tuple[str, int]]) -> None:
    """Tell the leader (at commit) which jobs have new queued runs to push: one statement."""
    if ops:
        await conn.execute(
            notifications_q.NOTIFY_EACH, [json.dumps({"op": op, "job_id": job}) for op, job in sorted(set(ops))]
        )
