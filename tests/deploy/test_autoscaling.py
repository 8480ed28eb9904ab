"""Scaling ahead of the clock in the Kubernetes manifests (issue 27, item 5): each pool's KEDA
ScaledObject has a prometheus trigger on the leader's runs-due gauge of the queues it serves, with a
horizon that covers the scaling delays; the HPA alternative (deploy/k8s/autoscaling/hpa) asks
prometheus-adapter for the same gauge, and the overlay deploy/README.md shows renders without KEDA.
Read as kustomize renders them (tests/deploy/kustomize.py), like tests/deploy/test_k8s.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronos.metrics import REGISTRY
from cronos.settings import Settings, load_settings
from dispatcher.due_ahead import HORIZONS_S
from dispatcher.due_gauge import INTERVAL_S
from tests.deploy.kustomize import render
from tests.deploy.manifests import (
    DEPLOY,
    K8S,
    Manifest,
    environment,
    k8s_manifests,
    of_kind,
    one,
    pod_spec,
    pool_manifests,
    rendered,
)

HPA_DIR = K8S / "autoscaling" / "hpa"
EVERYTHING = k8s_manifests() + rendered(K8S / "autoscaling" / "keda") + pool_manifests()
HPA = rendered(HPA_DIR)
# `max(cronos_runs_due_peak{queue="gpu",within_s="300"}) or vector(0)`
QUERY = re.compile(r'^max\((cronos_runs_due(?:_peak)?)\{queue="([^"]+)",within_s="(\d+)"\}\) or vector\(0\)$')
# What a horizon must cover besides the pod's start: a scrape (Prometheus' usual 15 s, or 30 s),
# and a pod's start for a pool scaled to zero (a node to provision, an image to pull, `cronos migrate`).
SCRAPE_S = 30
POD_START_S = 60
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")


def _settings(deployment: dict[str, Any]) -> Settings:
    container = pod_spec(deployment)["containers"][0]
    return load_settings(environ=environment(EVERYTHING, container), env_file=None)


def _due_triggers(scaled: Manifest) -> list[dict[str, Any]]:
    return [t for t in scaled.doc["spec"]["triggers"] if t["type"] == "prometheus"]


def _known(metric: str) -> bool:
    return metric in {family.name for family in REGISTRY.collect()}


@pytest.mark.parametrize("scaled", of_kind(EVERYTHING, "ScaledObject"), ids=lambda m: m.id)
def test_each_pool_scales_ahead_on_the_runs_due_of_the_queues_it_serves(scaled: Manifest) -> None:
    spec = scaled.doc["spec"]
    settings = _settings(one(EVERYTHING, "Deployment", spec["scaleTargetRef"]["name"]))
    triggers = _due_triggers(scaled)
    queried = []
    for trigger in triggers:
        assert trigger["name"] == "due" or trigger["name"].startswith("due-"), trigger
        found = QUERY.match(trigger["metadata"]["query"])
        assert found, trigger["metadata"]["query"]
        metric, queue, horizon = found.group(1), found.group(2), int(found.group(3))
        assert _known(metric) and metric == "cronos_runs_due_peak", metric
        assert horizon in HORIZONS_S, horizon
        queried.append(queue)
        # A pod per concurrency-worth of runs due in one second; any run due wakes a pool at zero.
        assert int(trigger["metadata"]["threshold"]) == settings.executor_concurrency, scaled.id
        assert trigger["metadata"]["activationThreshold"] == "0", scaled.id
        # Up before the herd: KEDA polls, Prometheus scrapes, the leader counts, the pod starts.
        needed = spec.get("pollingInterval", 30) + SCRAPE_S + INTERVAL_S
        if spec.get("minReplicaCount", 0) == 0:
            needed += POD_START_S
        assert horizon >= needed, f"{scaled.id}: {horizon} s < {needed} s"
    assert sorted(queried) == sorted(settings.executor_queues), scaled.id


def test_every_due_trigger_asks_the_same_prometheus() -> None:
    addresses = {t["metadata"]["serverAddress"] for s in of_kind(EVERYTHING, "ScaledObject") for t in _due_triggers(s)}
    assert len(addresses) == 1 and next(iter(addresses)).startswith("http"), addresses


def test_the_query_check_can_fail() -> None:
    """Negative control: a misspelt metric or label does not pass for the gauge."""
    assert QUERY.match('max(cronos_runs_due_peak{queue="gpu",within_s="300"}) or vector(0)')
    assert not QUERY.match('max(cronos_runs_due_peek{queue="gpu",within_s="300"}) or vector(0)')
    assert not QUERY.match('max(cronos_runs_due_peak{queue="gpu",within="300"}) or vector(0)')
    assert not _known("cronos_runs_due_peek")


def _adapter_rules() -> list[dict[str, Any]]:
    config = one(HPA, "ConfigMap", "cronos-prometheus-adapter-rules")["data"]["config.yaml"]
    rules: list[dict[str, Any]] = yaml.safe_load(config)["externalRules"]
    return rules


def test_the_hpa_alternative_asks_the_adapter_for_its_queues_runs_due() -> None:
    rules = {rule["name"]["as"]: rule for rule in _adapter_rules()}
    for name, rule in rules.items():
        assert rule["seriesQuery"].startswith(name + "{") and _known(name), name
        assert rule["resources"]["overrides"]["namespace"] == {"resource": "namespace"}
    hpas = of_kind(HPA, "HorizontalPodAutoscaler")
    assert hpas
    for hpa in hpas:
        target = hpa.doc["spec"]["scaleTargetRef"]
        deployment = one(EVERYTHING, target["kind"], target["name"])  # a Deployment of the base or a pool
        settings = _settings(deployment)
        for metric in hpa.doc["spec"]["metrics"]:
            external = metric["external"]
            assert external["metric"]["name"] in rules
            labels = external["metric"]["selector"]["matchLabels"]
            assert labels["queue"] in settings.executor_queues and int(labels["within_s"]) in HORIZONS_S
            assert external["target"] == {"type": "AverageValue", "averageValue": str(settings.executor_concurrency)}
        assert 1 <= hpa.doc["spec"]["minReplicas"] < hpa.doc["spec"]["maxReplicas"]


@needs_promtool
def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    queries = [t["metadata"]["query"] for s in of_kind(EVERYTHING, "ScaledObject") for t in _due_triggers(s)]
    for rule in _adapter_rules():  # as the adapter fills it in for the HPA's selector
        query = rule["metricsQuery"].replace("<<.Series>>", rule["name"]["as"])
        queries.append(query.replace("<<.LabelMatchers>>", 'namespace="cronos",queue="default",within_s="60"'))
        queries.append(rule["seriesQuery"].strip("'"))
    assert len(queries) >= 4
    records = [{"record": f"cronos:autoscaling_{i}", "expr": q} for i, q in enumerate(queries)]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "autoscaling", "rules": records}]}))
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _readme_overlay() -> str:
    """The overlay deploy/README.md shows for a cluster without KEDA (its one YAML block with the HPA)."""
    blocks = re.findall(r"```yaml\n(.*?)```", (DEPLOY / "README.md").read_text(), re.S)
    overlays: list[str] = [b for b in blocks if "autoscaling/hpa\n" in b]
    assert len(overlays) == 1
    return overlays[0]


def test_the_overlay_without_keda_renders_an_hpa_and_no_keda_object(tmp_path: Path) -> None:
    """As deploy/README.md shows it, in a checkout's overlays/<name>/: resources only (the base holds
    no KEDA object to delete), so the renderer of these tests renders it as kustomize does."""
    overlay = yaml.safe_load(_readme_overlay())
    assert overlay["resources"] == ["../../deploy/k8s", "../../deploy/k8s/autoscaling/hpa"]
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    (tmp_path / "overlays/no-keda").mkdir(parents=True)
    (tmp_path / "overlays/no-keda/kustomization.yaml").write_text(_readme_overlay())
    docs = render(tmp_path / "overlays/no-keda")
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert not {d["apiVersion"] for d in docs} & {"keda.sh/v1alpha1"}, kinds
    assert ("HorizontalPodAutoscaler", "cronos-executor") in kinds and ("Deployment", "cronos-executor") in kinds
