"""The Kubernetes manifests: schema-valid offline, and wired together as promised.

Built-in kinds are checked with kubernetes-validate (the Kubernetes JSON schemas ship in
its wheel, so no network is needed) in strict mode, which rejects unknown fields. KEDA's
ScaledObject/TriggerAuthentication are CRDs with no schema there: they are checked against
the small schemas in tests/deploy/schemas written for the fields used.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from cronos.keys import Keys
from cronos.settings import VARIABLES, load_settings
from tests.deploy.manifests import K8S, SCHEMAS, Manifest, k8s_manifests, of_kind, one

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed (pip install kubernetes-validate)"
)

K8S_VERSION = "1.30"  # the oldest Kubernetes these manifests target
CRD_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda-scaledobject.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "keda-triggerauthentication.json",
}
MANIFESTS = k8s_manifests()
WORKLOADS = ("cronos-api", "cronos-dispatcher", "cronos-executor")


def _validate(doc: dict[str, Any]) -> None:
    crd = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    if crd is None:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    else:
        schema = json.loads((SCHEMAS / crd).read_text())
        jsonschema.Draft202012Validator(schema).validate(doc)


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda m: m.id)
def test_manifest_is_schema_valid(manifest: Manifest) -> None:
    _validate(manifest.doc)


def test_the_validators_reject_a_typo() -> None:
    """Negative control: strict validation is not vacuous for either kind of schema."""
    deployment = copy.deepcopy(one(MANIFESTS, "Deployment", "cronos-executor"))
    container = _pod_spec(deployment)["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(jsonschema.ValidationError):
        _validate(deployment)

    scaled = copy.deepcopy(one(MANIFESTS, "ScaledObject", "cronos-executor"))
    scaled["spec"]["triggers"][0]["metadata"]["pendingEntriesCount"] = 8  # KEDA wants a string
    with pytest.raises(jsonschema.ValidationError):
        _validate(scaled)


def test_all_expected_objects_exist() -> None:
    kinds = {(m.kind, m.name) for m in MANIFESTS}
    for name in WORKLOADS:
        assert ("Deployment", name) in kinds
        assert ("PodDisruptionBudget", name) in kinds
    expected = {("Service", "cronos-api"), ("ConfigMap", "cronos-config"), ("Secret", "cronos-secrets")}
    assert expected | {("Job", "cronos-migrate"), ("ScaledObject", "cronos-executor")} <= kinds
    assert all("namespace" not in m.doc["metadata"] for m in MANIFESTS), "manifests must be namespace-less"


def test_kustomization_lists_every_manifest_file() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / "kustomization.json").read_text())).validate(kustomization)
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files


def test_dispatcher_runs_two_replicas_and_executor_count_belongs_to_keda() -> None:
    assert one(MANIFESTS, "Deployment", "cronos-dispatcher")["spec"]["replicas"] == 2
    assert "replicas" not in one(MANIFESTS, "Deployment", "cronos-executor")["spec"], "the HPA owns the count"


@pytest.mark.parametrize("name", WORKLOADS)
def test_every_container_has_probes_on_a_declared_port(name: str) -> None:
    for container in _pod_spec(one(MANIFESTS, "Deployment", name))["containers"]:
        ports = {p["name"] for p in container.get("ports", [])} | {p["containerPort"] for p in container["ports"]}
        for probe in ("livenessProbe", "readinessProbe"):
            assert probe in container, f"{name}/{container['name']} has no {probe}"
            assert container[probe]["httpGet"]["port"] in ports


def test_liveness_never_depends_on_the_backends() -> None:
    """/health answers 503 while PostgreSQL or Redis is down, and the API's /metrics counts jobs in
    PostgreSQL: as liveness either would restart healthy pods during an outage."""
    for name in WORKLOADS:
        for container in _pod_spec(one(MANIFESTS, "Deployment", name))["containers"]:
            path = container["livenessProbe"]["httpGet"]["path"]
            assert path == ("/openapi.json" if name == "cronos-api" else "/metrics"), name
    api = _pod_spec(one(MANIFESTS, "Deployment", "cronos-api"))["containers"][0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/health"


def test_selectors_match_existing_pod_labels() -> None:
    """Every PDB, Service and Deployment selector selects the pods of exactly one Deployment."""
    deployments = of_kind(MANIFESTS, "Deployment")

    def selected(match: dict[str, str]) -> list[str]:
        return [d.name for d in deployments if match.items() <= d.doc["spec"]["template"]["metadata"]["labels"].items()]

    for d in deployments:
        assert selected(d.doc["spec"]["selector"]["matchLabels"]) == [d.name]
    for pdb in of_kind(MANIFESTS, "PodDisruptionBudget"):
        assert selected(pdb.doc["spec"]["selector"]["matchLabels"]) == [pdb.name], pdb.name
    service = one(MANIFESTS, "Service", "cronos-api")
    assert selected(service["spec"]["selector"]) == ["cronos-api"]
    api_ports = {p["name"] for p in _pod_spec(one(MANIFESTS, "Deployment", "cronos-api"))["containers"][0]["ports"]}
    assert all(p["targetPort"] in api_ports for p in service["spec"]["ports"])


def test_pdbs_leave_room_to_drain_a_node() -> None:
    """A PDB that allows no disruption at the Deployment's size blocks every node drain."""
    for pdb in of_kind(MANIFESTS, "PodDisruptionBudget"):
        spec = pdb.doc["spec"]
        replicas = one(MANIFESTS, "Deployment", pdb.name)["spec"].get("replicas")
        if "minAvailable" in spec:
            assert replicas is not None and spec["minAvailable"] < replicas, pdb.name
        else:
            assert spec["maxUnavailable"] >= 1, pdb.name


def test_scaledobject_scales_the_executor_on_its_stream_group() -> None:
    scaled = one(MANIFESTS, "ScaledObject", "cronos-executor")["spec"]
    target = scaled["scaleTargetRef"]
    assert (target.get("kind", "Deployment"), target["name"]) == ("Deployment", "cronos-executor")
    assert one(MANIFESTS, "Deployment", target["name"])  # exists
    prefix = one(MANIFESTS, "ConfigMap", "cronos-config")["data"]["CRONOS_KEY_PREFIX"]
    keys = Keys(prefix)
    triggers = scaled["triggers"]
    assert any("pendingEntriesCount" in t["metadata"] for t in triggers)
    secret = one(MANIFESTS, "Secret", "cronos-secrets")["stringData"]
    for trigger in triggers:
        assert trigger["type"] == "redis-streams"
        assert trigger["metadata"]["stream"] == keys.stream
        assert trigger["metadata"]["consumerGroup"] == keys.group
        auth = one(MANIFESTS, "TriggerAuthentication", trigger["authenticationRef"]["name"])
        for ref in auth["spec"]["secretTargetRef"]:
            assert ref["name"] == "cronos-secrets" and ref["key"] in secret
    assert scaled["minReplicaCount"] >= 1 and scaled["maxReplicaCount"] > scaled["minReplicaCount"]


def test_config_decodes_as_cronos_settings() -> None:
    """Every ConfigMap/Secret key Cronos reads is a real variable with a value Settings accepts."""
    config = one(MANIFESTS, "ConfigMap", "cronos-config")["data"]
    secret = one(MANIFESTS, "Secret", "cronos-secrets")["stringData"]
    assert set(config) <= set(VARIABLES), f"unknown variables: {set(config) - set(VARIABLES)}"
    assert {"DATABASE_URL", "REDIS_URL"} <= set(secret), "connection URLs belong in the Secret"
    assert not {"DATABASE_URL", "REDIS_URL"} & set(config), "connection URLs must not sit in the ConfigMap"
    settings = load_settings(environ={**config, **secret}, env_file=None)
    assert settings.metrics_port == 9102 and settings.log_format == "json"
    for name in WORKLOADS:
        pod = _pod_spec(one(MANIFESTS, "Deployment", name))
        if name == "cronos-executor":
            assert pod["terminationGracePeriodSeconds"] > settings.drain_timeout_s
        for container in pod["containers"]:
            refs = {next(iter(src.values()))["name"] for src in container["envFrom"]}
            assert refs == {"cronos-config", "cronos-secrets"}


def test_pods_run_as_non_root() -> None:
    for m in of_kind(MANIFESTS, "Deployment") + of_kind(MANIFESTS, "Job"):
        pod = _pod_spec(m.doc)
        assert pod["securityContext"]["runAsNonRoot"] is True, m.id
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, m.id


def test_the_api_requires_tokens_from_its_own_secret() -> None:
    """CRONOS_AUTH=required, and the admin/metrics tokens come from a Secret only the API pods read."""
    api = _pod_spec(one(MANIFESTS, "Deployment", "cronos-api"))["containers"][0]
    env = {e["name"]: e for e in api["env"]}
    assert env["CRONOS_AUTH"]["value"] == "required"
    values: dict[str, str] = {}
    for name in ("CRONOS_ADMIN_TOKEN", "CRONOS_METRICS_TOKEN"):
        ref = env[name]["valueFrom"]["secretKeyRef"]
        secret = one(MANIFESTS, "Secret", ref["name"])["stringData"]
        assert ref["name"] != "cronos-secrets", "every role reads cronos-secrets: the tokens are the API's alone"
        values[name] = secret[ref["key"]]
    settings = load_settings(environ={**values, "CRONOS_AUTH": "required"}, env_file=None)
    assert settings.auth == "required" and settings.admin_token and settings.metrics_token
    for name in ("cronos-dispatcher", "cronos-executor"):
        for container in _pod_spec(one(MANIFESTS, "Deployment", name))["containers"]:
            assert not {"CRONOS_ADMIN_TOKEN", "CRONOS_METRICS_TOKEN"} & {e["name"] for e in container.get("env", [])}


def _pool_manifests() -> list[Manifest]:
    """The executor pools of other queues, deploy/k8s/pools/<queue>/ (applied after the base)."""
    found = []
    for path in sorted((K8S / "pools").glob("*/*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        found += [
            Manifest(f"pools/{path.parent.name}/{path.name}", doc) for doc in yaml.safe_load_all(path.read_text())
        ]
    return found


POOLS = _pool_manifests()


@pytest.mark.parametrize("manifest", POOLS, ids=lambda m: m.id)
def test_pool_manifest_is_schema_valid(manifest: Manifest) -> None:
    _validate(manifest.doc)


def test_each_pool_scales_on_the_streams_of_the_queues_it_serves() -> None:
    """Every ScaledObject, of the base and of each pool, watches exactly the streams of the queues
    its Deployment serves (CRONOS_QUEUES), and pools do not select each other's pods."""
    assert POOLS, "deploy/k8s/pools holds at least the example pool"
    everything = MANIFESTS + POOLS
    keys = Keys(one(MANIFESTS, "ConfigMap", "cronos-config")["data"]["CRONOS_KEY_PREFIX"])
    served: dict[str, tuple[str, ...]] = {}
    for scaled in of_kind(everything, "ScaledObject"):
        deployment = one(everything, "Deployment", scaled.doc["spec"]["scaleTargetRef"]["name"])
        env = {e["name"]: e.get("value") for e in _pod_spec(deployment)["containers"][0].get("env", [])}
        queues = load_settings(environ={"CRONOS_QUEUES": env["CRONOS_QUEUES"]}, env_file=None).executor_queues
        served[scaled.name] = queues
        streams = {t["metadata"]["stream"] for t in scaled.doc["spec"]["triggers"]}
        assert streams == {keys.queue_stream(q) for q in queues}, scaled.name
        assert all(t["metadata"]["consumerGroup"] == keys.group for t in scaled.doc["spec"]["triggers"])
        for trigger in scaled.doc["spec"]["triggers"]:
            one(everything, "TriggerAuthentication", trigger["authenticationRef"]["name"])
    assert len(served) >= 2 and len({q for qs in served.values() for q in qs}) >= 2
    selectors = [
        tuple(sorted(d.doc["spec"]["selector"]["matchLabels"].items())) for d in of_kind(everything, "Deployment")
    ]
    assert len(selectors) == len(set(selectors))
