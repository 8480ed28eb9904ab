"""Job events: the facts about a job an operator may be told about (issue 24).

Pure. The leader's health evaluator produces them from the ledger, the job's expectations and
the run kinds its channels ask for (`RUN_KINDS`), and writes them with
`cronos.store.events.insert_events` (fenced, deduplicated by `dedupe_key`);
the leader's notifier routes each unrouted event to the channels whose rules match it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class JobEventKind(StrEnum):
    FAILED = "failed"  # a run failed with no retry left
    RECOVERED = "recovered"  # the first success after one or more failures
    MISSED = "missed"  # a tick of the schedule with no run
    LATE_START = "late_start"  # started later than the job's `start_within`
    OVERRAN = "overran"  # still running past the job's `finish_within`
    TOO_FAST = "too_fast"  # finished sooner than the job's `not_faster_than`
    NO_SUCCESS = "no_success"  # no success within the job's `success_every` period
    SKIPPED = "skipped"  # a tick ended skipped, with its reason
    CANCELLED = "cancelled"  # a run was cancelled, by whom
    PAUSED_BY_BREAKER = "paused_by_breaker"  # paused itself after failing too often in a row
    CANARY_BY_BREAKER = "canary_by_breaker"  # held paused, the breaker let one run through
    RESUMED_BY_BREAKER = "resumed_by_breaker"  # a canary completed: the breaker resumed the job
    # Opt-in per channel (never a default): derived only for the jobs a channel asks them of.
    STARTED = "started"  # a run started
    COMPLETED = "completed"  # a run completed
    ENDED = "ended"  # a run that started ended, whatever its outcome: completed, failed, cancelled


# The kinds the leader announces of every run (of the jobs some channel asks them of).
RUN_KINDS = frozenset({JobEventKind.STARTED, JobEventKind.COMPLETED, JobEventKind.ENDED})


@dataclass(frozen=True, slots=True)
class JobEvent:
    job_id: int
    kind: JobEventKind
    occurred_at: datetime
    # Names the fact once, e.g. "failed:<run_id>", "missed:<job_id>:<tick iso>": writing the same
    # fact twice (a new leader re-scanning) is a no-op.
    dedupe_key: str
    run_id: int | None = None
    # What a notification shows beside the run: reason, consecutive_failures, expected/actual...
    detail: Mapping[str, Any] = field(default_factory=dict)
