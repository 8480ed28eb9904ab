"""Every Prometheus metric Cronos exports, declared once.

All roles in one process (as `cronos dev` runs them) share this registry, so one
/metrics endpoint shows them all. No per-job label unless the operator opts in
(CRONOS_METRICS_JOB_LABELS), because job ids are unbounded.
"""

from __future__ import annotations

import bisect
import contextlib
import fnmatch
import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from cronos.selectors import prometheus_label

REGISTRY = CollectorRegistry(auto_describe=True)


def _le(bound: float) -> str:
    """A bucket's `le` as prometheus_client writes it (0.5, 1.0, 4.194304e+06)."""
    return str(floatToGoString(bound))  # type: ignore[no-untyped-call]


# Histograms an executor observes for every run, on its loop: kept as plain counts, without a lock
# (a prometheus_client Histogram's observe took five times as long, several times a run), and
# exported as histograms on scrape.
class LoopHistogram:
    """A histogram, one series per value of its `label` (none: one series), each made at its first
    observation; observed from one thread only (an executor's loop)."""

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float], label: str | None = None, *,
        registry: CollectorRegistry | None = None,
    ) -> None:  # fmt: skip
        self.name, self.documentation, self.bounds, self.label = name, documentation, tuple(buckets), label
        self._series: dict[str, list[float]] = {}  # label value -> [count in each bucket..., past the last, sum]
        if label is None:
            self.series()  # one series, exported (at zero) from the start as prometheus_client's is
        if registry is not None:
            registry.register(self)  # a collector: collect() is all it needs

    def observe(self, value: float, key: str = "") -> None:
        self.add(self.series(key), value)

    def series(self, key: str = "") -> list[float]:
        """The series of label value `key` (made now if it has none), for `add`: a caller observing
        run after run looks it up once."""
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0.0] * (len(self.bounds) + 2)
        return series

    def add(self, series: list[float], value: float) -> None:
        series[bisect.bisect_left(self.bounds, value)] += 1  # `le`: a value on a bound is in its bucket
        series[-1] += value

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=[self.label] if self.label else [])
        for key, series in list(self._series.items()):
            counts, total = series[:-1], series[-1]
            cumulative = list(itertools.accumulate(counts))
            buckets = [(_le(b), c) for b, c in zip(self.bounds, cumulative, strict=False)]
            family.add_metric([key] if self.label else [], [*buckets, ("+Inf", cumulative[-1])], total)
        yield family


_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_DURATION_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)

LEADER = Gauge("cronos_leader", "1 while this process is the leader", registry=REGISTRY)
LEADER_EPOCH = Gauge(
    "cronos_leader_epoch", "Fencing epoch this process leads with (0 when not leading)", registry=REGISTRY
)
LEADER_DB_OK = Gauge(
    "cronos_leader_postgres_ok_timestamp_seconds",
    "When this leader last completed a PostgreSQL round trip (unix time; a leader steps down past its bound)",
    registry=REGISTRY,
)
LEADER_LAST_WRITE = Gauge(
    "cronos_leader_last_write_timestamp_seconds",
    "When this leader last wrote ticks to the ledger (unix time; 0: none yet)",
    registry=REGISTRY,
)
TICK_WRITE = Histogram(
    "cronos_tick_write_seconds",
    "A tick-write round of the leader: its due ticks planned, written to the ledger, handed to the outbox",
    buckets=_LAG_BUCKETS,
    registry=REGISTRY,
)
LEADER_ELECTIONS = Counter("cronos_leader_elections_total", "Elections this process won", registry=REGISTRY)
TICKS_DISPATCHED = Counter("cronos_ticks_dispatched_total", "Run tokens pushed onto the stream", registry=REGISTRY)
DISPATCH_LAG = Histogram(
    "cronos_dispatch_lag_seconds", "Push time minus due time of each token", buckets=_LAG_BUCKETS, registry=REGISTRY
)
RUNS = Counter("cronos_runs_total", "Runs ended, by final state and kind", ["state", "kind"], registry=REGISTRY)
RUN_DURATION = LoopHistogram(
    "cronos_run_duration_seconds", "Wall time of finished runs", _DURATION_BUCKETS, "kind", registry=REGISTRY
)
# The start delay and its two parts, as the API shows them (cronos.delays).
RUN_START_DELAY = LoopHistogram(
    "cronos_run_start_delay_seconds",
    "Start delay: started_at minus scheduled_for (the tick), whatever held the run",
    _LAG_BUCKETS,
    registry=REGISTRY,
)
RUN_HELD_BACK = LoopHistogram(
    "cronos_run_held_back_seconds",
    "Of the start delay, held back on purpose: due_at minus scheduled_for (retry backoff, catch-up pace, jitter)",
    _LAG_BUCKETS,
    registry=REGISTRY,
)
RUN_WAITED = LoopHistogram(
    "cronos_run_waited_seconds",
    "Of the start delay, waited once due: started_at minus due_at (behind a predecessor, for an executor)",
    _LAG_BUCKETS,
    registry=REGISTRY,
)
LOCK_ACQUISITIONS = Counter(
    "cronos_lock_acquisitions_total", "Lock attempts by lock and result", ["lock", "result"], registry=REGISTRY
)
# Each executor process exports its own series (one per process, whatever the fleet's size): the
# share of each is sum by (node) (rate(...)) over the fleet's scrapes.
EXECUTOR_RUNS_STARTED = Counter(
    "cronos_executor_runs_started_total",
    "Runs this executor claimed and started, labelled with its node id (the cluster page shows each one's share)",
    ["node"],
    registry=REGISTRY,
)
RUNS_IN_FLIGHT = Gauge("cronos_runs_in_flight", "Runs executing in this process", registry=REGISTRY)
RUNS_OVERRUNNING = Gauge(
    "cronos_runs_overrunning",
    "Runs of plain (threaded) task functions past their timeout or cancel, still running until their thread returns",
    registry=REGISTRY,
)
RUNS_CANCEL_SIGNALLED = Counter(
    "cronos_runs_cancel_signalled_total", "Running runs whose work was told to stop by a cancel", registry=REGISTRY
)
# Per-host limits of http requests (executor.host_limits): aggregates only, a host is never a label
# (targets are unbounded); the host is named in the run's error and the http.host_wait_long log.
HTTP_HOST_WAITS = Counter(
    "cronos_http_host_waits_total",
    "http requests that waited for their host's limit, by how the wait ended: granted, timed_out, cancelled",
    ["outcome"],
    registry=REGISTRY,
)
for _outcome in ("granted", "timed_out", "cancelled"):  # every series from 0
    HTTP_HOST_WAITS.labels(_outcome)
HTTP_HOST_WAIT = Histogram(
    "cronos_http_host_wait_seconds",
    "How long an http request that waited for its host's limit waited",
    buckets=_LAG_BUCKETS,
    registry=REGISTRY,
)
HTTP_HOST_REQUESTS_WAITING = Gauge(
    "cronos_http_host_requests_waiting", "http requests waiting now for their host's limit", registry=REGISTRY
)
HTTP_HOSTS_WAITING = Gauge(
    "cronos_http_hosts_waiting", "Hosts with at least one http request waiting for their limit now", registry=REGISTRY
)
STREAM_PENDING = Gauge(
    "cronos_stream_pending", "Tokens delivered but not yet acknowledged, per queue", ["queue"], registry=REGISTRY
)
STREAM_LENGTH = Gauge("cronos_stream_length", "Entries in a queue's run stream (leader)", ["queue"], registry=REGISTRY)
STREAM_LAG = Gauge(
    "cronos_stream_lag",
    "Run tokens on a queue's stream that no executor has read yet (leader; a queue nobody serves keeps growing)",
    ["queue"],
    registry=REGISTRY,
)
QUEUE_GAUGES = (STREAM_LENGTH, STREAM_PENDING, STREAM_LAG)  # the series a queue has (one each)


def forget_queue(queue: str) -> None:
    """Remove a dropped queue's series: a gone queue is no series, not a stale one."""
    for gauge in QUEUE_GAUGES:
        with contextlib.suppress(KeyError):  # never exported in this process
            gauge.remove(queue)


# Runs due ahead (issue 27: an autoscaler brings executors up before a herd), from the leader's
# schedule (dispatcher/due_gauge.py), for a fixed set of horizons: the `within_s` label.
RUNS_DUE = Gauge(
    "cronos_runs_due",
    "Runs the schedule has due in the next within_s seconds, per queue: paused jobs, calendar days off and"
    " blackouts excluded (leader)",
    ["queue", "within_s"],
    registry=REGISTRY,
)
RUNS_DUE_PEAK = Gauge(
    "cronos_runs_due_peak",
    "The most runs due in any one second of the next within_s seconds, per queue: the herd executors must"
    " take at once (leader)",
    ["queue", "within_s"],
    registry=REGISTRY,
)


def set_due(due: Mapping[str, tuple[Mapping[int, int], Mapping[int, int]]], before: set[str]) -> set[str]:
    """The runs-due series of these queues, each (runs, peak) by horizon; the series of the queues
    exported `before` and absent now are removed (set first, then removed: a scrape in between sees
    no gap). Returns the queues exported."""
    for queue, (runs, peak) in due.items():
        for horizon, count in runs.items():
            RUNS_DUE.labels(queue, str(horizon)).set(count)
            RUNS_DUE_PEAK.labels(queue, str(horizon)).set(peak[horizon])
    for queue in before - set(due):
        for gauge in (RUNS_DUE, RUNS_DUE_PEAK):
            for labels in [k for k in _label_sets(gauge) if k[0] == queue]:
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels)
    return set(due)


def _label_sets(gauge: Gauge) -> list[tuple[str, ...]]:
    return [tuple(sample.labels.values()) for family in gauge.collect() for sample in family.samples]


def forget_due() -> None:
    """No runs-due series: a node that does not lead exports none (never a former leader's numbers)."""
    RUNS_DUE.clear()
    RUNS_DUE_PEAK.clear()


RUNS_OVERDUE = Gauge(
    "cronos_runs_overdue",
    "Queued runs more than a second past their due time: the backlog executors have not started (leader;"
    " counted up to 100,000)",
    registry=REGISTRY,
)
WATCHDOG_REPUSHED = Counter(
    "cronos_watchdog_repushed_total",
    "Tokens the leader's watchdog pushed again: runs still queued CRONOS_OVERDUE_AFTER_MS past due",
    registry=REGISTRY,
)
TICKS_EXPECTED = Counter(
    "cronos_ticks_expected_total",
    "Ticks the reconciliation auditor found in jobs' schedules (leader; settled windows)",
    registry=REGISTRY,
)
TICKS_UNACCOUNTED = Counter(
    "cronos_ticks_unaccounted_total",
    "Audited ticks with neither a run nor a recorded skip in the ledger (leader; must stay 0)",
    registry=REGISTRY,
)
TICK_START_DELAY = Histogram(
    "cronos_tick_start_delay_seconds",
    "Start delay (started_at - scheduled_for) of the audited ticks' first attempts (leader)",
    buckets=_LAG_BUCKETS,
    registry=REGISTRY,
)
EXECUTOR_LOST_RUNS = Counter(
    "cronos_executor_lost_runs_total", "Runs reaped because their executor was lost", registry=REGISTRY
)
TOKENS_HANDED_OVER = Counter(
    "cronos_tokens_handed_over_total",
    "Run tokens an executor without their task action gave back to its queue's other executors",
    ["queue"],
    registry=REGISTRY,
)
TOKENS_UNSERVED = Counter(
    "cronos_tokens_unserved_total",
    "Run tokens whose task action no live executor of their queue serves (the run stays queued)",
    ["queue"],
    registry=REGISTRY,
)
JOBS = Gauge("cronos_jobs", "Registered jobs by status", ["status"], registry=REGISTRY)
RUNS_SKIPPED = Counter(
    "cronos_runs_skipped_total", "Ticks recorded as skipped, by reason", ["reason"], registry=REGISTRY
)
TOKENS_PAST_GRACE = Counter(
    "cronos_tokens_past_grace_total",
    "Run tokens an executor read past their run's misfire grace and acknowledged without a lock or a claim"
    " (the leader's reaper ends those runs skipped, expired): an overload's backlog older than the grace",
    registry=REGISTRY,
)
BACKEND_UP = Gauge("cronos_backend_up", "1 when the backend answered the last check", ["backend"], registry=REGISTRY)

# Per-job series (issue 24), bounded: the leader exports at most CRONOS_JOB_METRICS_MAX jobs whose
# names match CRONOS_JOB_METRICS_JOBS, and counts the rest as dropped (dispatcher/health.py). The
# label is `job_name`: `job` is Prometheus' own target label (a scrape would rename ours exported_job).
# The job labels whose keys CRONOS_METRIC_LABEL_KEYS allow-lists (at most 5: each multiplies no
# series, but every distinct value is a series) are added as `label_<key>` ("" when a job has none).
_JOB_LABEL_KEYS: tuple[str, ...] = ()


def _job_gauges(keys: tuple[str, ...]) -> tuple[Gauge, Gauge]:
    names = ["job_name", *(prometheus_label(key) for key in keys)]  # collisions: cronos.settings refuses
    last_success = Gauge(
        "cronos_job_last_success_timestamp_seconds",
        "When the job's newest completed run finished (unix time; leader; capped, see cronos_job_metrics_dropped)",
        names,
        registry=REGISTRY,
    )
    failures = Gauge(
        "cronos_job_consecutive_failures",
        "Runs of the job that failed in a row, with no retry left (leader; capped, see cronos_job_metrics_dropped)",
        names,
        registry=REGISTRY,
    )
    return last_success, failures


JOB_LAST_SUCCESS, JOB_CONSECUTIVE_FAILURES = _job_gauges(())
JOB_METRICS_DROPPED = Gauge(
    "cronos_job_metrics_dropped",
    "Jobs matching CRONOS_JOB_METRICS_JOBS beyond CRONOS_JOB_METRICS_MAX: not exported per job (leader)",
    registry=REGISTRY,
)


def job_allowed(name: str, names: Sequence[str]) -> bool:
    """CRONOS_JOB_METRICS_JOBS' meaning (`*` and `?` globs): empty allows every job."""
    return not names or any(fnmatch.fnmatchcase(name, n) for n in names)


# What each run's work used (cronos.run_usage), per job, observed by the executor that ran it:
# CRONOS_JOB_METRICS_JOBS picks the jobs, and each executor process gives series to the first
# CRONOS_JOB_METRICS_MAX of them it runs (executor.usage_metrics); the runs of the others are counted.
_CPU_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 1800, 3600)
_RSS_BUCKETS = tuple(float(2**n) for n in range(22, 36, 2))  # 4 MiB to 16 GiB, by four
JOB_RUN_WALL = LoopHistogram(
    "cronos_job_run_wall_seconds",
    "Wall time of each run's work, per job (executor; capped, see cronos_job_run_usage_dropped_total)",
    _DURATION_BUCKETS,
    "job_name",
    registry=REGISTRY,
)
JOB_RUN_CPU = LoopHistogram(
    "cronos_job_run_cpu_seconds",
    "CPU time of each shell and task run's work (user + system), per job (executor; capped)",
    _CPU_BUCKETS,
    "job_name",
    registry=REGISTRY,
)
JOB_RUN_MAX_RSS = LoopHistogram(
    "cronos_job_run_max_rss_bytes",
    "Peak resident memory of each shell run's largest process, per job (executor; capped)",
    _RSS_BUCKETS,
    "job_name",
    registry=REGISTRY,
)
JOB_RUN_USAGE_DROPPED = Counter(
    "cronos_job_run_usage_dropped_total",
    "Runs whose usage this executor did not export per job: their job came after CRONOS_JOB_METRICS_MAX others",
    registry=REGISTRY,
)


def _label_keys(keys: tuple[str, ...]) -> None:
    """The per-job gauges with these label keys: made anew (a metric's label names are fixed) when
    they change, which is once per process (the keys are a setting)."""
    global JOB_LAST_SUCCESS, JOB_CONSECUTIVE_FAILURES, _JOB_LABEL_KEYS
    if keys == _JOB_LABEL_KEYS:
        return
    REGISTRY.unregister(JOB_LAST_SUCCESS)
    REGISTRY.unregister(JOB_CONSECUTIVE_FAILURES)
    JOB_LAST_SUCCESS, JOB_CONSECUTIVE_FAILURES = _job_gauges(keys)
    _JOB_LABEL_KEYS = keys


def set_jobs(
    jobs: list[tuple[str, int, Any, Mapping[str, str]]], dropped: int, label_keys: tuple[str, ...] = ()
) -> None:
    """The per-job series, replacing the previous set (a job gone or beyond the cap has none): each
    (name, failures in a row, last success, the job's labels), with the labels of `label_keys`."""
    _label_keys(label_keys)
    JOB_LAST_SUCCESS.clear()
    JOB_CONSECUTIVE_FAILURES.clear()
    for name, failures, last_success, labels in jobs:
        values = [name, *(labels.get(key, "") for key in label_keys)]
        JOB_CONSECUTIVE_FAILURES.labels(*values).set(failures)
        if last_success is not None:
            JOB_LAST_SUCCESS.labels(*values).set(last_success.timestamp())
    JOB_METRICS_DROPPED.set(dropped)


def forget_jobs() -> None:
    JOB_LAST_SUCCESS.clear()
    JOB_CONSECUTIVE_FAILURES.clear()
    JOB_METRICS_DROPPED.set(0)


# Notifications (issue 24), by channel kind (webhook, slack, email): never a channel's name.
# `sent`, `retried` (an attempt failed, another is due), `failed` (gave up after its attempts),
# `suppressed` (a rule held it back at routing: threshold, rate limit, quiet hours that drop).
NOTIFICATIONS = Counter(
    "cronos_notifications_total",
    "Notification deliveries by channel kind and outcome (leader)",
    ["kind", "outcome"],
    registry=REGISTRY,
)
for _kind in ("webhook", "slack", "email"):  # every series from 0: an alert's increase() sees the first one
    for _outcome in ("sent", "retried", "failed", "suppressed"):
        NOTIFICATIONS.labels(_kind, _outcome)
NOTIFICATIONS_PENDING = Gauge(
    "cronos_notifications_pending", "Deliveries waiting to be sent, quiet hours' included (leader)", registry=REGISTRY
)
NOTIFICATIONS_OLDEST_DUE = Gauge(
    "cronos_notifications_oldest_due_age_seconds",
    "How long the oldest due pending delivery has been due; 0 when none is (leader)",
    registry=REGISTRY,
)


def set_pending(count: int, oldest_due_age_s: float) -> None:
    NOTIFICATIONS_PENDING.set(count)
    NOTIFICATIONS_OLDEST_DUE.set(oldest_due_age_s)


def forget_pending() -> None:
    set_pending(0, 0.0)


# Rows holding an instant outside cronos.instants' range (an older version's, or a hand's: PostgreSQL's
# infinity), skipped by the role reading them instead of stopping it; by table, never a job's id.
ROWS_UNUSABLE_INSTANT = Counter(
    "cronos_rows_unusable_instant_total",
    "Rows a role skipped because an instant in them is outside the range Cronos stores (logged with the row's id)",
    ["table"],
    registry=REGISTRY,
)
for _table in ("jobs", "pauses", "blackouts", "tokens"):
    ROWS_UNUSABLE_INSTANT.labels(_table)
