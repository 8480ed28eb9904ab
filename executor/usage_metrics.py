"""Per-job histograms of what runs used (cronos.run_usage; declared in cronos.metrics), bounded.

Job names are unbounded, so a process gives series to at most CRONOS_JOB_METRICS_MAX jobs, those
CRONOS_JOB_METRICS_JOBS allows, in the order it first runs them (the leader's per-job gauges take
the same settings); the runs of a job past the cap are counted in
cronos_job_run_usage_dropped_total. A series is made on its first observation: a task job has no
memory series.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cronos import metrics
from cronos.run_usage import Usage

_REFUSED_KEPT = 10_000  # names the allow-list refused, remembered (a refusal is a glob match per run)


class JobUsage:
    def __init__(self, max_jobs: int, names: Sequence[str] = ()) -> None:
        self._max = max_jobs
        self._names = tuple(names)
        self._admitted: dict[str, _Series] = {}  # job -> its series, each made on its first observation
        self._refused: set[str] = set()

    def observe(self, name: str, usage: Usage) -> None:
        series = self._admitted.get(name)
        if series is None:
            if not self._admit(name):
                return
            series = self._admitted[name] = _Series(metrics.JOB_RUN_WALL.series(name))
        metrics.JOB_RUN_WALL.add(series.wall, usage.wall_ms / 1000)
        if usage.cpu_ms is not None:
            if series.cpu is None:
                series.cpu = metrics.JOB_RUN_CPU.series(name)
            metrics.JOB_RUN_CPU.add(series.cpu, usage.cpu_ms / 1000)
        if usage.max_rss_bytes is not None:
            if series.rss is None:
                series.rss = metrics.JOB_RUN_MAX_RSS.series(name)
            metrics.JOB_RUN_MAX_RSS.add(series.rss, usage.max_rss_bytes)

    def _admit(self, name: str) -> bool:
        if name in self._refused:
            return False
        if not metrics.job_allowed(name, self._names):
            if len(self._refused) < _REFUSED_KEPT:
                self._refused.add(name)
            return False
        if len(self._admitted) >= self._max:
            metrics.JOB_RUN_USAGE_DROPPED.inc()
            return False
        return True


@dataclass(slots=True)
class _Series:
    """A job's series of the three histograms, looked up once per job, not twice per run."""

    wall: list[float]
    cpu: list[float] | None = None
    rss: list[float] | None = None
