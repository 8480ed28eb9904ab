"""Every metric in cronos/metrics.py, exercised once, renders an exposition `promtool check metrics` accepts.

The metrics are exercised in a child process so this test leaves the shared REGISTRY of the
test process untouched (other tests read counters from it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from cronos import metrics
from cronos.metrics import REGISTRY

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")

# The metrics issue #6 promises, by exposition family name (counters without _total).
PROMISED = {
    "cronos_leader": "gauge",
    "cronos_leader_epoch": "gauge",
    "cronos_leader_elections": "counter",
    "cronos_ticks_dispatched": "counter",
    "cronos_dispatch_lag_seconds": "histogram",
    "cronos_runs": "counter",
    "cronos_run_duration_seconds": "histogram",
    "cronos_run_start_delay_seconds": "histogram",
    "cronos_lock_acquisitions": "counter",
    "cronos_runs_in_flight": "gauge",
    "cronos_stream_pending": "gauge",
    "cronos_executor_lost_runs": "counter",
    "cronos_jobs": "gauge",
    "cronos_stream_lag": "gauge",
    "cronos_runs_overdue": "gauge",
}

# Runs in a fresh interpreter: give every metric realistic label values and one update.
EXERCISE = """
import sys
from prometheus_client import Counter, Gauge, Histogram, Summary, generate_latest
import cronos.metrics as m

VALUES = {"state": "completed", "kind": "task", "lock": "tick", "result": "acquired",
          "status": "active", "reason": "misfired", "backend": "postgresql"}
seen = 0
for metric in vars(m).values():
    if isinstance(metric, m.LoopHistogram):  # a collector of plain counts: one observation
        seen += 1
        metric.observe(0.042, VALUES.get(metric.label, "x") if metric.label else "")
        continue
    if not isinstance(metric, (Counter, Gauge, Histogram, Summary)):
        continue
    seen += 1
    names = metric._labelnames
    child = metric.labels(*(VALUES.get(n, "x") for n in names)) if names else metric
    if isinstance(metric, Counter):
        child.inc()
    elif isinstance(metric, Gauge):
        child.set(1)
    else:
        child.observe(0.042)
assert seen, "no metric found in cronos.metrics"
with open(sys.argv[1], "wb") as f:
    f.write(generate_latest(m.REGISTRY))
"""


def _families() -> dict[str, str]:
    return {family.name: family.type for family in REGISTRY.collect()}


def test_every_promised_metric_is_declared() -> None:
    families = _families()
    missing = {name: kind for name, kind in PROMISED.items() if families.get(name) != kind}
    assert missing == {}, f"missing or wrong type in cronos.metrics: {missing}"


def test_promised_metrics_have_no_per_job_label() -> None:
    """Job ids are unbounded: a job label only where the operator opts in (CRONOS_METRICS_JOB_LABELS)."""
    declared = {m._name: m._labelnames for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)}
    declared |= {m.name: (m.label,) for m in vars(metrics).values() if isinstance(m, metrics.LoopHistogram)}
    for name in PROMISED:
        assert not {"job", "job_id"} & set(declared[name]), name


def _render(path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", EXERCISE, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return path.read_text()


def test_exposition_has_a_sample_for_every_metric(tmp_path: Path) -> None:
    text = _render(tmp_path / "metrics.txt")
    rendered = {family.name for family in text_string_to_metric_families(text) if family.samples}
    assert set(_families()) <= rendered
    assert 'cronos_runs_total{kind="task",state="completed"} 1.0' in text


@needs_promtool
def test_promtool_check_metrics_accepts_the_exposition(tmp_path: Path) -> None:
    path = tmp_path / "metrics.txt"
    _render(path)
    assert PROMTOOL is not None
    with path.open("rb") as exposition:
        done = subprocess.run([PROMTOOL, "check", "metrics"], stdin=exposition, capture_output=True, timeout=60)
    report = (done.stdout + done.stderr).decode()
    assert done.returncode == 0, report
    assert report.strip() == "", f"promtool lint findings:\n{report}"


@needs_promtool
def test_promtool_check_metrics_can_fail(tmp_path: Path) -> None:
    """Negative control: a counter without the _total suffix is a lint error."""
    path = tmp_path / "bad.txt"
    path.write_text("# HELP cronos_bad Bad.\n# TYPE cronos_bad counter\ncronos_bad 1\n")
    with path.open("rb") as exposition:
        done = subprocess.run([PROMTOOL or "promtool", "check", "metrics"], stdin=exposition, capture_output=True)
    assert done.returncode != 0
