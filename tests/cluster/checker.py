"""The invariant checker: G1-G5 over the runs ledger, the leader log and the job definitions.

Pure: it is handed rows (see ledger.py for loading them) and a window, and returns a
Report listing every violation with the rows that show it. Expected ticks come from
ticks.py, never from the product's schedule code.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tests.cluster.receiver import Delivery
from tests.cluster.ticks import expected_ticks

OPEN = ("queued", "waiting", "running")  # not ended
Interval = tuple[datetime, datetime | None]  # [entered running, left running); None: still running
# A queued run past its misfire grace is expired by a periodic pass of the leader, so a claim
# may still win for a moment after the grace: a start later than grace + this is a violation.
LATE_SLACK_S = 5.0


@dataclass(frozen=True, slots=True)
class JobDef:
    id: int
    cron_expression: str
    timezone: str = "UTC"
    status: str = "active"
    concurrency_policy: str = "forbid"
    max_retries: int = 0
    created_at: datetime | None = None
    kind: str = "task"
    misfire_grace_s: float = 60.0


@dataclass(frozen=True, slots=True)
class RunRow:
    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    trigger: str
    state: str
    due_at: datetime
    created_at: datetime
    epoch: int | None = None
    node_id: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    skip_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Violation:
    code: str  # G1.duplicate, G2.missing, ... (see check())
    message: str
    rows: tuple[RunRow, ...] = ()


@dataclass(slots=True)
class Report:
    window: tuple[datetime, datetime]
    violations: list[Violation] = field(default_factory=list)
    expected: int = 0
    states: Counter[str] = field(default_factory=Counter)
    skip_reasons: Counter[str] = field(default_factory=Counter)
    start_delays_s: list[float] = field(default_factory=list)  # attempt-1 schedule runs in the window

    @property
    def ok(self) -> bool:
        return not self.violations

    def codes(self) -> Counter[str]:
        return Counter(v.code for v in self.violations)

    def add(self, code: str, message: str, rows: Iterable[RunRow] = ()) -> None:
        self.violations.append(Violation(code, message, tuple(rows)))

    def describe(self, limit: int = 30) -> str:
        lines = [f"window {self.window[0].isoformat()} .. {self.window[1].isoformat()}: {self.expected} ticks expected"]
        lines.append(f"states {dict(self.states)}, skips {dict(self.skip_reasons)}")
        for v in self.violations[:limit]:
            lines.append(f"  {v.code}: {v.message}")
            lines.extend(f"      {row}" for row in v.rows[:4])
        if len(self.violations) > limit:
            lines.append(f"  ... and {len(self.violations) - limit} more")
        return "\n".join(lines)


def check(
    jobs: Sequence[JobDef],
    runs: Sequence[RunRow],
    leader_log: dict[int, datetime],
    window: tuple[datetime, datetime],
    deliveries: Sequence[Delivery] = (),
    running: Mapping[int, Interval] | None = None,
) -> Report:
    """Check every invariant over (start, end]; runs due after `end` are only checked for G1/G3/G5.

    `running`: run id -> when it entered and left `running`, from the harness's audit trigger.
    """
    report = Report(window)
    by_job: dict[int, list[RunRow]] = defaultdict(list)
    for run in runs:
        by_job[run.job_id].append(run)
    _g1_identity(report, runs)
    for job in jobs:
        _g2_every_tick(report, job, by_job[job.id], window)
        if job.concurrency_policy == "forbid":
            _g3_no_overlap(report, job, by_job[job.id], running)
        _g4_settled(report, job, by_job[job.id], window[1])
    _g5_fencing(report, runs, leader_log)
    _not_early(report, runs)
    _http_once(report, deliveries)
    _http_matches_ledger(report, jobs, runs, deliveries, window[1])
    return report


def _g1_identity(report: Report, runs: Sequence[RunRow]) -> None:
    groups: dict[tuple[int, datetime, int], list[RunRow]] = defaultdict(list)
    for run in runs:
        groups[(run.job_id, run.scheduled_for, run.attempt)].append(run)
    for (job_id, tick, attempt), rows in groups.items():
        if len(rows) > 1:
            report.add(
                "G1.duplicate", f"job {job_id} tick {tick.isoformat()} attempt {attempt}: {len(rows)} rows", rows
            )


def _g2_every_tick(report: Report, job: JobDef, runs: list[RunRow], window: tuple[datetime, datetime]) -> None:
    start, end = window
    if job.created_at is not None:
        start = max(start, job.created_at)
    firsts: dict[datetime, list[RunRow]] = defaultdict(list)
    for run in runs:
        if run.trigger == "schedule" and run.attempt == 1:
            firsts[run.scheduled_for].append(run)
    expected = expected_ticks(job.cron_expression, job.timezone, start, end) if job.status == "active" else []
    report.expected += len(expected)
    for tick in expected:
        rows = firsts.get(tick, [])
        if not rows:
            report.add("G2.missing", f"job {job.id} tick {tick.isoformat()}: no run and no skip")
            continue
        row = rows[0]
        report.states[row.state] += 1
        if row.state == "skipped":
            report.skip_reasons[row.skip_reason or ""] += 1
            if not row.skip_reason:
                report.add(
                    "G2.skip_without_reason", f"job {job.id} tick {tick.isoformat()} skipped without reason", rows
                )
        elif row.started_at is not None:
            delay = (row.started_at - tick).total_seconds()
            report.start_delays_s.append(delay)
            if (row.started_at - row.due_at).total_seconds() > job.misfire_grace_s + LATE_SLACK_S:
                report.add(
                    "G2.ran_past_grace", f"job {job.id} tick {tick.isoformat()} started {delay:.1f} s late", rows
                )
    wanted = set(expected)
    for tick, rows in firsts.items():
        if start < tick <= end and tick not in wanted:
            report.add("G2.unexpected_tick", f"job {job.id} has a run for {tick.isoformat()}, not a tick", rows)


def _g3_no_overlap(report: Report, job: JobDef, runs: list[RunRow], running: Mapping[int, Interval] | None) -> None:
    """With `running` (the audit of state changes), intervals are exact; else the ledger's timestamps.

    The ledger's started_at/finished_at are the product's now(), a transaction's start: a claim
    that waited on the one-running-run index for the previous run's finish to commit is recorded
    as starting before that finish. The audit's clock times are taken after the index check.
    """
    spans: list[tuple[datetime, datetime | None, RunRow]] = []
    for run in runs:
        span = running.get(run.id) if running is not None else None
        if span is None and run.started_at is not None:
            span = (run.started_at, run.finished_at)
        if span is not None:
            spans.append((span[0], span[1], run))
    spans.sort(key=lambda s: (s[0], s[2].id))
    latest: RunRow | None = None  # the run whose interval reaches furthest
    reach: datetime | None = None  # where it ends; None while it is open-ended
    for begin, end, run in spans:
        if latest is not None and (reach is None or begin < reach):
            report.add(
                "G3.overlap", f"forbid job {job.id}: run {run.id} started while run {latest.id} ran", (latest, run)
            )
        if latest is None or (reach is not None and (end is None or end > reach)):
            latest, reach = run, end


def _g4_settled(report: Report, job: JobDef, runs: list[RunRow], end: datetime) -> None:
    identities = {(r.scheduled_for, r.attempt) for r in runs}
    for run in runs:
        if run.state in OPEN and run.due_at <= end:
            report.add("G4.unsettled", f"job {job.id}: run {run.id} still {run.state} after settling", (run,))
        if run.state == "failed":
            if not run.error:
                report.add("G4.failed_without_error", f"job {job.id}: run {run.id} failed without an error", (run,))
            if run.attempt <= job.max_retries and (run.scheduled_for, run.attempt + 1) not in identities:
                report.add(
                    "G4.not_retried", f"job {job.id}: failed run {run.id} has no attempt {run.attempt + 1}", (run,)
                )


def _g5_fencing(report: Report, runs: Sequence[RunRow], leader_log: dict[int, datetime]) -> None:
    for run in runs:
        if run.epoch is None:
            continue
        successor = leader_log.get(run.epoch + 1)
        if successor is not None and run.created_at >= successor:
            message = f"run {run.id} created by epoch {run.epoch} at {run.created_at.isoformat()}"
            report.add(
                "G5.stale_epoch", f"{message}, after epoch {run.epoch + 1} began at {successor.isoformat()}", (run,)
            )


def _not_early(report: Report, runs: Sequence[RunRow]) -> None:
    for run in runs:
        if run.started_at is not None and run.started_at < run.scheduled_for:
            report.add("early_start", f"run {run.id} started {run.started_at.isoformat()} before its tick", (run,))
        elif run.started_at is not None and run.started_at < run.due_at:  # a retry's backoff, a jitter
            report.add("early_start", f"run {run.id} started {run.started_at.isoformat()} before it was due", (run,))


def _http_once(report: Report, deliveries: Sequence[Delivery]) -> None:
    counts = Counter((d.idempotency_key, d.attempt) for d in deliveries)
    for (key, attempt), count in counts.items():
        if key is None:
            report.add("http.no_idempotency_key", f"{count} deliveries without an Idempotency-Key")
        elif count > 1:
            report.add("http.duplicate_delivery", f"tick {key} attempt {attempt} delivered {count} times")


def delivery_key(run: RunRow) -> tuple[str, str]:
    """The (Idempotency-Key, X-Cronos-Attempt) an http run sends: DESIGN's `<job_id>:<scheduled_for>`."""
    return f"{run.job_id}:{run.scheduled_for.isoformat()}", str(run.attempt)


def _http_matches_ledger(
    report: Report, jobs: Sequence[JobDef], runs: Sequence[RunRow], deliveries: Sequence[Delivery], end: datetime
) -> None:
    """A completed http run was delivered; a delivery belongs to a run that started.

    Read the deliveries before the ledger, so every delivery's run is in the ledger.
    """
    http_jobs = {job.id for job in jobs if job.kind == "http"}
    if not http_jobs:
        return
    delivered = {(d.idempotency_key, d.attempt) for d in deliveries}
    started = {delivery_key(r) for r in runs if r.job_id in http_jobs and r.started_at is not None}
    for run in runs:
        ended = run.finished_at is not None and run.finished_at <= end  # deliveries are read after `end`
        if run.job_id in http_jobs and run.state == "completed" and ended and delivery_key(run) not in delivered:
            report.add("http.undelivered", f"http run {run.id} completed but its target never received it", (run,))
    for key, attempt in sorted(delivered - started, key=str):
        report.add("http.phantom_delivery", f"tick {key} attempt {attempt} delivered without a started run")
