"""deploy/prometheus/alerts.yml: valid rules on declared metrics, and they fire when they should
(`promtool test rules`, Debian package `prometheus`) - on the leader's backlog only."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronos.metrics import REGISTRY
from tests.deploy.manifests import DEPLOY

ALERTS = DEPLOY / "prometheus" / "alerts.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
SUFFIXES = ("", "_total", "_created", "_bucket", "_sum", "_count")

D1 = 'instance="d1:9102", job="cronos-dispatcher"'  # the leader
D2 = 'instance="d2:9102", job="cronos-dispatcher"'  # led once, kept its last count


def _rules() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return {r["alert"]: r for group in doc["groups"] for r in group["rules"]}


def test_the_alerts_query_declared_metrics() -> None:
    known = {family.name + suffix for family in REGISTRY.collect() for suffix in SUFFIXES}
    rules = _rules()
    assert {"CronosRunsOverdue", "CronosTokensLost"} <= set(rules)
    used = {name for rule in rules.values() for name in re.findall(r"\b(cronos_[a-z_]+)\b", rule["expr"])}
    assert "cronos_runs_overdue" in used and "cronos_watchdog_repushed_total" in used
    assert used <= known, sorted(used - known)


def _expected(alert: str, value: str) -> list[dict[str, Any]]:
    rule = _rules()[alert]
    annotations = {k: v.replace("{{ $value }}", value) for k, v in rule["annotations"].items()}
    return [{"exp_labels": rule["labels"], "exp_annotations": annotations}]


def _promtool_test(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    spec = tmp_path / "alerts_test.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(ALERTS)], "evaluation_interval": "1m", "tests": tests}))
    return subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True, timeout=60)


def _overdue_case(leader_overdue: str, former_overdue: str, expected: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": [
            {"series": f"cronos_leader{{{D1}}}", "values": "1x10"},
            {"series": f"cronos_runs_overdue{{{D1}}}", "values": leader_overdue},
            {"series": f"cronos_leader{{{D2}}}", "values": "0x10"},
            {"series": f"cronos_runs_overdue{{{D2}}}", "values": former_overdue},
        ],
        "alert_rule_test": [
            {"eval_time": "1m", "alertname": "CronosRunsOverdue", "exp_alerts": []},  # not for 2 minutes yet
            {"eval_time": "5m", "alertname": "CronosRunsOverdue", "exp_alerts": expected},
        ],
    }


def _leader_case(series: str, values: str, alert: str, evals: list[tuple[str, str | None]]) -> dict[str, Any]:
    """One series of the leader's, and `alert` at each (eval time, the $value it fires with; None: silent)."""
    return {
        "interval": "1m",
        "input_series": [{"series": f"{series}{{{D1}}}", "values": values}],
        "alert_rule_test": [
            {"eval_time": at, "alertname": alert, "exp_alerts": [] if value is None else _expected(alert, value)}
            for at, value in evals
        ],
    }


@needs_promtool
def test_promtool_accepts_the_rules() -> None:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_a_backlog_on_the_leader_alerts_and_a_former_leaders_stale_count_does_not(tmp_path: Path) -> None:
    tests = [
        _overdue_case("5x10", "0x10", _expected("CronosRunsOverdue", "5")),
        _overdue_case("0x10", "7x10", []),  # only the dispatcher that no longer leads says 7
        _leader_case("cronos_watchdog_repushed_total", "0+3x30", "CronosTokensLost", [("5m", None), ("25m", "30")]),
    ]
    done = _promtool_test(tmp_path, tests)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_rule_test_can_fail(tmp_path: Path) -> None:
    """Negative control: a backlog expected to stay silent makes promtool fail."""
    done = _promtool_test(tmp_path, [_overdue_case("5x10", "0x10", [])])
    assert done.returncode != 0


@needs_promtool
def test_an_unaccounted_tick_alerts_until_it_leaves_the_window(tmp_path: Path) -> None:
    assert "cronos_ticks_unaccounted_total" in _rules()["CronosTicksUnaccounted"]["expr"]
    # Silent again at 25m: 15 minutes without a new one.
    evals = [("2m", None), ("5m", "1"), ("25m", None)]
    case = _leader_case("cronos_ticks_unaccounted_total", "0 0 0 1x30", "CronosTicksUnaccounted", evals)
    done = _promtool_test(tmp_path, [case])
    assert done.returncode == 0, done.stdout + done.stderr
    silent = {**case, "alert_rule_test": [{**case["alert_rule_test"][1], "exp_alerts": []}]}
    assert _promtool_test(tmp_path, [silent]).returncode != 0, "negative control: the alert does fire"


@needs_promtool
def test_a_skipped_row_alerts_until_it_leaves_the_window(tmp_path: Path) -> None:
    evals = [("2m", None), ("5m", "1"), ("25m", None)]
    case = _leader_case("cronos_rows_unusable_instant_total", "0 0 0 1x30", "CronosRowsUnusable", evals)
    done = _promtool_test(tmp_path, [case])
    assert done.returncode == 0, done.stdout + done.stderr


def _job_case(series: str, leader: str, former: str, alert: str, evals: list[tuple[str, str | None]]) -> dict[str, Any]:
    """A per-job series on the leader (D1) and on a former leader (D2, its stale value), job `nightly`."""
    rule = _rules()[alert]
    labels = {**rule["labels"], "job_name": "nightly"}

    def expected(value: str) -> list[dict[str, Any]]:
        annotations = {
            k: v.replace("{{ $value }}", value).replace("{{ $labels.job_name }}", "nightly")
            for k, v in rule["annotations"].items()
        }
        return [{"exp_labels": labels, "exp_annotations": annotations}]

    return {
        "interval": "1m",
        "input_series": [
            {"series": f"cronos_leader{{{D1}}}", "values": "1x40"},
            {"series": f'{series}{{{D1}, job_name="nightly"}}', "values": leader},
            {"series": f"cronos_leader{{{D2}}}", "values": "0x40"},
            {"series": f'{series}{{{D2}, job_name="nightly"}}', "values": former},
        ],
        "alert_rule_test": [
            {"eval_time": at, "alertname": alert, "exp_alerts": [] if value is None else expected(value)}
            for at, value in evals
        ],
    }


@needs_promtool
def test_a_job_failing_three_times_alerts_with_its_name_on_the_leaders_series_only(tmp_path: Path) -> None:
    used = _rules()["CronosJobFailing"]["expr"]
    assert "cronos_job_consecutive_failures" in used and "job_name" in used
    tests = [
        _job_case(
            "cronos_job_consecutive_failures",
            "1 2 3x10 0x10",
            "0x30",
            "CronosJobFailing",
            [("1m", None), ("5m", "3"), ("20m", None)],
        ),
        _job_case("cronos_job_consecutive_failures", "0x30", "5x30", "CronosJobFailing", [("5m", None)]),
        _job_case("cronos_job_metrics_dropped", "0x30", "0x30", "CronosJobMetricsDropped", [("5m", None)]),
    ]
    done = _promtool_test(tmp_path, tests)
    assert done.returncode == 0, done.stdout + done.stderr
    silent = _job_case("cronos_job_consecutive_failures", "3x30", "0x30", "CronosJobFailing", [("5m", None)])
    assert _promtool_test(tmp_path, [silent]).returncode != 0, "negative control: the alert does fire"


def _notify_case(
    alert: str, series: str, leader: str, former: str, evals: list[tuple[str, dict[str, str] | None]]
) -> dict[str, Any]:
    """`series` on the leader (D1) and a former leader (D2); at each eval time the alert fires with
    the given template values replaced in its annotations, or (None) stays silent."""
    rule = _rules()[alert]

    def expected(values: dict[str, str]) -> list[dict[str, Any]]:
        annotations = dict(rule["annotations"])
        for template, value in values.items():
            annotations = {k: v.replace(template, value) for k, v in annotations.items()}
        labels = {
            **rule["labels"],
            **({"kind": values["{{ $labels.kind }}"]} if "{{ $labels.kind }}" in values else {}),
        }
        return [{"exp_labels": labels, "exp_annotations": annotations}]

    return {
        "interval": "1m",
        "input_series": [
            {"series": f"cronos_leader{{{D1}}}", "values": "1x60"},
            {"series": series.format(D1), "values": leader},
            {"series": f"cronos_leader{{{D2}}}", "values": "0x60"},
            {"series": series.format(D2), "values": former},
        ],
        "alert_rule_test": [
            {"eval_time": at, "alertname": alert, "exp_alerts": [] if values is None else expected(values)}
            for at, values in evals
        ],
    }


@needs_promtool
def test_notifications_given_up_or_stuck_alert_on_the_leaders_series(tmp_path: Path) -> None:
    failed = 'cronos_notifications_total{{{}, kind="webhook", outcome="failed"}}'
    webhook = {"{{ $labels.kind }}": "webhook"}
    stuck = "cronos_notifications_oldest_due_age_seconds{{{}}}"
    tests = [
        # Given up once at 11m: it alerts for the 30 minutes after; a former leader's old count does not.
        _notify_case("CronosNotificationsFailing", failed, "0x10 1x50", "3x60",
                     [("5m", None), ("15m", webhook), ("50m", None)]),
        _notify_case("CronosNotificationsStuck", stuck, "0x5 700x40", "0x60",
                     [("8m", None), ("15m", {"{{ $value | humanizeDuration }}": "11m 40s"})]),
        _notify_case("CronosNotificationsStuck", stuck, "0x60", "900x60", [("15m", None)]),
    ]  # fmt: skip
    done = _promtool_test(tmp_path, tests)
    assert done.returncode == 0, done.stdout + done.stderr
    silent = _notify_case("CronosNotificationsFailing", failed, "0x10 1x50", "0x60", [("15m", None)])
    assert _promtool_test(tmp_path, [silent]).returncode != 0, "negative control: the alert does fire"
