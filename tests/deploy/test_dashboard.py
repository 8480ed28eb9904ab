"""deploy/grafana/cronos-dashboard.json: parses, is laid out, and queries only metrics that exist.

Metric names are checked against cronos.metrics.REGISTRY (with the exposition suffixes
_total/_bucket/_sum/_count/_created); with promtool installed, every expression is also parsed
as PromQL by wrapping it in a recording rule.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronos.metrics import REGISTRY
from tests.deploy.manifests import DEPLOY

DASHBOARD = DEPLOY / "grafana" / "cronos-dashboard.json"
SUFFIXES = ("", "_total", "_created", "_bucket", "_sum", "_count")
METRIC = re.compile(r"\b(cronos_[a-zA-Z0-9_]+)\b")
# Grafana's interval variables, replaced by durations so the expression is plain PromQL.
GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "30s", "$__range": "6h"}
# The panels the operations issue asks for, by a metric each must query.
REQUIRED = (
    "cronos_leader",
    "cronos_leader_epoch",
    "cronos_ticks_dispatched_total",
    "cronos_dispatch_lag_seconds_bucket",
    "cronos_runs_total",
    "cronos_run_duration_seconds_bucket",
    "cronos_run_start_delay_seconds_bucket",
    "cronos_runs_in_flight",
    "cronos_stream_pending",
    "cronos_executor_lost_runs_total",
    "cronos_jobs",
    "cronos_stream_lag",
    "cronos_runs_overdue",
    "cronos_watchdog_repushed_total",
)


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def _panels(container: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in container.get("panels", []):
        yield panel
        yield from _panels(panel)


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in _panels(dashboard) for t in p.get("targets", []) if t.get("expr")]


def _known_series() -> set[str]:
    return {family.name + suffix for family in REGISTRY.collect() for suffix in SUFFIXES}


def test_is_a_grafana_dashboard(dashboard: dict[str, Any]) -> None:
    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in _panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in _panels(dashboard):
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], f"panel {panel['title']!r} has no query"
            assert panel["datasource"]["uid"] == "${datasource}", "panels use the data source variable"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"


def test_every_queried_metric_exists(dashboard: dict[str, Any]) -> None:
    used = {name for expr in _exprs(dashboard) for name in METRIC.findall(expr)}
    assert used, "the dashboard queries no cronos metric"
    unknown = used - _known_series()
    assert unknown == set(), f"not declared in cronos.metrics: {sorted(unknown)}"


def test_covers_the_promised_panels(dashboard: dict[str, Any]) -> None:
    used = {name for expr in _exprs(dashboard) for name in METRIC.findall(expr)}
    assert set(REQUIRED) - used == set()
    quantiles = [e for e in _exprs(dashboard) if "histogram_quantile(0.99" in e]
    assert any("cronos_dispatch_lag_seconds_bucket" in e for e in quantiles)
    assert any("cronos_run_start_delay_seconds_bucket" in e for e in quantiles)
    assert any("histogram_quantile(0.5" in e and "cronos_run_duration_seconds_bucket" in e for e in _exprs(dashboard))


def test_the_name_check_can_fail() -> None:
    """Negative control: a misspelt metric is not mistaken for a declared one."""
    assert "cronos_runs_totl" not in _known_series()
    assert "cronos_run_duration_seconds_bucket" in _known_series()


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (apt-get install prometheus)")
def test_every_expression_is_valid_promql(dashboard: dict[str, Any], tmp_path: Path) -> None:
    rules = []
    for i, expr in enumerate(_exprs(dashboard)):
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, f"unreplaced Grafana variable in {expr!r}"
        rules.append({"record": f"cronos:dashboard_expr_{i}", "expr": expr})
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
