"""The Kubernetes manifests, as `kubectl apply -k` renders them: schema-valid offline, and wired to
what the product defines.

Everything here reads the rendered objects (tests/deploy/kustomize.py: the subset of kustomize the
files use, compared with `kubectl kustomize` where kubectl is installed), never the raw files: what
a cluster gets is what is checked. Built-in kinds are checked with kubernetes-validate (the
Kubernetes JSON schemas ship in its wheel, so no network is needed) in strict mode, which rejects
unknown fields. KEDA's ScaledObject/TriggerAuthentication are CRDs with no schema there: they are
checked against the small schemas in tests/deploy/schemas written for the fields used, and only the
autoscaling/keda and pools/ overlays hold them: the base has built-in kinds only, so it applies on a
cluster without KEDA. Every kustomization (the base and each overlay) is rendered and validated.
tests/deploy/test_deploy_processes.py runs the rendered containers' commands as real processes.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from cronos.errors import ConfigError
from cronos.keys import Keys
from cronos.settings import VARIABLES, Settings, load_settings
from tests.deploy.kustomize import Unsupported, object_id, render
from tests.deploy.manifests import (
    AUTOSCALING,
    K8S,
    POOLS,
    SCHEMAS,
    Manifest,
    all_containers,
    environment,
    k8s_manifests,
    of_kind,
    one,
    operator_environment,
    overlay_manifests,
    overlays,
    pod_spec,
    pool_manifests,
    rendered,
)

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed (pip install kubernetes-validate)"
)

K8S_VERSION = "1.30"  # the oldest Kubernetes these manifests target
CRD_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda-scaledobject.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "keda-triggerauthentication.json",
}
MANIFESTS = k8s_manifests()
POOL_MANIFESTS = pool_manifests()
KEDA = rendered(AUTOSCALING / "keda")
# The base, then every overlay: KEDA's and the HPA's autoscaling (no workload, so no image of their
# own) and the executor pools.
EVERYTHING = MANIFESTS + POOL_MANIFESTS + overlay_manifests("autoscaling")
WORKLOADS = ("cronos-api", "cronos-dispatcher", "cronos-executor")
KUSTOMIZATIONS = [K8S, *overlays()]
WITH_IMAGES = [K8S, *sorted(p for p in POOLS.iterdir() if p.is_dir())]

# Variables in a pod's environment that Cronos does not read, and why they are there.
NON_CRONOS_VARIABLES = {
    "REDIS_ADDRESS": "KEDA's redis-streams scaler (TriggerAuthentication cronos-redis): host:port, not a URL",
    "REDIS_PASSWORD": "KEDA's redis-streams scaler (TriggerAuthentication cronos-redis)",
}
# ConfigMap values that differ from the product's defaults on purpose; every other value equals its default.
DEPLOYMENT_CHOICES = {
    "CRONOS_METRICS_PORT": "the dispatcher's and executor's probes need their /metrics (default 0: off)",
    "CRONOS_LOG_FORMAT": "JSON lines for a log collector (default auto: json unless a terminal)",
}


def _validate(doc: dict[str, Any]) -> None:
    crd = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    if crd is None:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    else:
        schema = json.loads((SCHEMAS / crd).read_text())
        jsonschema.Draft202012Validator(schema).validate(doc)


def _workloads(manifests: list[Manifest]) -> Iterator[tuple[Manifest, dict[str, Any]]]:
    """(workload, container) for every container and init container of every pod template."""
    for m in manifests:
        if "template" in m.doc.get("spec", {}):
            for container in all_containers(pod_spec(m.doc)):
                yield m, container


def _stream_triggers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A ScaledObject's triggers on its Redis streams (not the prometheus one on the runs due ahead)."""
    return [t for t in spec["triggers"] if t["type"] != "prometheus"]


def _settings(manifests: list[Manifest], container: dict[str, Any]) -> Settings:
    return load_settings(environ=operator_environment(manifests, container), env_file=None)


def _kustomize_image() -> str:
    """The image the base's kustomization sets: newName:newTag of its one `images` entry."""
    images = yaml.safe_load((K8S / "kustomization.yaml").read_text())["images"]
    assert len(images) == 1 and images[0]["name"] == "cronos"
    return f"{images[0].get('newName', 'cronos')}:{images[0]['newTag']}"


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(K8S)))
def test_every_kustomization_renders_schema_valid_objects(directory: Path) -> None:
    """The base and each overlay as `kubectl kustomize` renders it: every object valid for its kind,
    built-in kinds against the Kubernetes schemas, CRDs against tests/deploy/schemas (an object of a
    kind in neither fails: SchemaNotFoundError)."""
    objects = rendered(directory)
    assert objects, directory
    for manifest in objects:
        _validate(manifest.doc)


def test_the_base_applies_on_a_cluster_without_keda() -> None:
    """A cluster without KEDA refuses a ScaledObject or TriggerAuthentication (no such resource), so
    `kubectl apply -k deploy/k8s` failed there: the base holds built-in kinds only, KEDA's objects
    are in autoscaling/keda (and the pools scaled from zero)."""
    for manifest in MANIFESTS:
        assert (manifest.doc["apiVersion"], manifest.kind) not in CRD_SCHEMAS, manifest.id
        kubernetes_validate.validate(manifest.doc, K8S_VERSION, strict=True)  # a schema of the built-in set
    kinds = {(m.kind, m.name) for m in KEDA}
    assert kinds == {("ScaledObject", "cronos-executor"), ("TriggerAuthentication", "cronos-redis")}
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):  # negative control: not a built-in kind
        kubernetes_validate.validate(one(KEDA, "ScaledObject", "cronos-executor"), K8S_VERSION, strict=True)


def test_the_validators_reject_a_typo() -> None:
    """Negative control: strict validation is not vacuous for either kind of schema."""
    deployment = copy.deepcopy(one(MANIFESTS, "Deployment", "cronos-executor"))
    container = pod_spec(deployment)["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(jsonschema.ValidationError):
        _validate(deployment)

    scaled = copy.deepcopy(one(KEDA, "ScaledObject", "cronos-executor"))
    scaled["spec"]["triggers"][0]["metadata"]["pendingEntriesCount"] = 8  # KEDA wants a string
    with pytest.raises(jsonschema.ValidationError):
        _validate(scaled)


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(K8S)))
def test_kustomization_lists_every_manifest_file(directory: Path) -> None:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / "kustomization.json").read_text())).validate(kustomization)
    files = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(K8S)))
def test_the_python_rendering_is_what_kubectl_kustomize_renders(directory: Path) -> None:
    """The renderer these tests read through agrees with kustomize itself, object for object."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the rendering is checked against kustomize where it is")
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    theirs = {object_id(doc): doc for doc in yaml.safe_load_all(done.stdout) if doc is not None}
    ours = {object_id(doc): doc for doc in render(directory)}
    assert ours == theirs


def test_the_renderer_refuses_what_it_does_not_render(tmp_path: Path) -> None:
    """Negative control: a kustomization past the subset fails loudly instead of rendering wrongly."""
    for extra in ({"namePrefix": "prod-"}, {"labels": [{"pairs": {"a": "b"}, "includeSelectors": True}]}):
        shutil.copytree(K8S, tmp_path / "k8s", dirs_exist_ok=True)
        kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text()) | extra
        (tmp_path / "k8s/kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        with pytest.raises(Unsupported):
            render(tmp_path / "k8s")


def test_all_expected_objects_exist() -> None:
    kinds = {(m.kind, m.name) for m in MANIFESTS}
    for name in WORKLOADS:
        assert ("Deployment", name) in kinds
        assert ("PodDisruptionBudget", name) in kinds
    expected = {("Service", "cronos-api"), ("ConfigMap", "cronos-config"), ("Secret", "cronos-secrets")}
    assert expected <= kinds
    assert all("namespace" not in m.doc["metadata"] for m in EVERYTHING), "manifests must be namespace-less"


def test_every_image_is_the_one_kustomize_sets() -> None:
    """`kubectl apply -k` is the only way in, and it gives every container, init containers too, the
    image of kustomization.yaml's `images` entry: never Docker Hub's `library/cronos`."""
    image = _kustomize_image()
    assert "/" in image.split(":", 1)[0], f"{image}: a bare name is pulled from Docker Hub"
    found = {(m.id, c["name"]): c["image"] for m, c in _workloads(EVERYTHING)}
    assert len(found) >= 8 and set(found.values()) == {image}, found
    for directory in WITH_IMAGES:  # each pool sets the base's image, not one of its own
        entries = yaml.safe_load((directory / "kustomization.yaml").read_text())["images"]
        assert [f"{e.get('newName', 'cronos')}:{e['newTag']}" for e in entries] == [image], directory


def test_every_deployment_migrates_before_its_role_starts() -> None:
    """The first install and every upgrade: each pod runs `cronos migrate` (safe concurrently: an
    advisory lock, tests/integration/test_migrations.py) with its own image before its role, so no
    pod of a release meets a schema older than its code, and nothing needs a separate step."""
    for m in of_kind(EVERYTHING, "Deployment"):
        pod = pod_spec(m.doc)
        init = pod.get("initContainers", [])
        assert [c["args"] for c in init] == [["migrate"]], m.id
        role = pod["containers"][0]
        assert init[0]["image"] == role["image"], m.id
        secrets = {s["secretRef"]["name"] for s in init[0]["envFrom"] if "secretRef" in s}
        assert "cronos-secrets" in secrets, f"{m.id}: migrate needs DATABASE_URL"
        assert _settings(EVERYTHING, init[0]).database_url == _settings(EVERYTHING, role).database_url, m.id


def test_no_object_a_reapply_would_have_to_mutate(tmp_path: Path) -> None:
    """An upgrade is the same `kubectl apply -k` with another image: between two releases only pod
    templates of Deployments change (a rolling update). A Job's pod template is immutable, so a Job
    whose content follows the release fails every apply until it is deleted."""
    shutil.copytree(K8S, tmp_path / "k8s")
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    kustomization["images"][0]["newTag"] = "next-release"
    (tmp_path / "k8s/kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    before = {object_id(doc): doc for doc in render(K8S)}
    after = {object_id(doc): doc for doc in render(tmp_path / "k8s")}
    assert before.keys() == after.keys()
    changed = [key for key in before if before[key] != after[key]]
    assert {key[1] for key in changed} == {"Deployment"}, changed
    for key in changed:
        old, new = copy.deepcopy(before[key]), copy.deepcopy(after[key])
        del old["spec"]["template"], new["spec"]["template"]
        assert old == new, f"{key}: only the pod template may change"
    assert not {"Job", "CronJob"} & {m.kind for m in EVERYTHING}


def test_dispatcher_runs_two_replicas_and_executor_count_belongs_to_keda() -> None:
    assert one(MANIFESTS, "Deployment", "cronos-dispatcher")["spec"]["replicas"] == 2
    assert "replicas" not in one(MANIFESTS, "Deployment", "cronos-executor")["spec"], "the HPA owns the count"


def _listening_port(role: str, settings: Settings) -> int:
    """The port the role serves: the API on PORT, the dispatcher and executor /metrics on CRONOS_METRICS_PORT."""
    return settings.port if role == "api" else settings.metrics_port


@pytest.mark.parametrize("manifest", of_kind(EVERYTHING, "Deployment"), ids=lambda m: m.id)
def test_every_probe_asks_a_declared_port_the_role_listens_on(manifest: Manifest) -> None:
    pod = pod_spec(manifest.doc)
    for container in pod["containers"]:
        declared = {p["name"]: p["containerPort"] for p in container["ports"]}
        listens = _listening_port(container["args"][0], _settings(EVERYTHING, container))
        assert listens and set(declared.values()) == {listens}, f"{manifest.id}: declares {declared}"
        for probe in ("livenessProbe", "readinessProbe"):
            assert probe in container, f"{manifest.id}/{container['name']} has no {probe}"
            port = container[probe]["httpGet"]["port"]
            assert declared.get(port, port) == listens, f"{manifest.id}/{probe}: {port}"
        annotations = manifest.doc["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == str(listens), manifest.id


@pytest.mark.parametrize("manifest", of_kind(EVERYTHING, "Deployment"), ids=lambda m: m.id)
def test_liveness_asks_the_event_loop_and_readiness_the_backends(manifest: Manifest) -> None:
    """/health answers 503 while PostgreSQL or Redis is down, and the API's /metrics counts jobs in
    PostgreSQL: as liveness either would restart healthy pods during an outage. The other roles'
    /metrics is served by a thread of prometheus-client, so it answered while their event loop was
    stuck: their liveness is /livez, answered by the loop (tests/deploy/test_probes.py)."""
    for container in pod_spec(manifest.doc)["containers"]:
        live, ready = (container[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe"))
        api = container["args"][0] == "api"
        assert (live, ready) == (("/openapi.json", "/health") if api else ("/livez", "/readyz")), manifest.id


def test_every_environment_variable_is_one_cronos_reads() -> None:
    """Each name a container's environment gets, by env or through envFrom, is a variable of
    cronos/settings.py (a typo there is silently ignored by the product) or a documented other one."""
    for m, container in _workloads(EVERYTHING):
        names = set(environment(EVERYTHING, container))
        unknown = names - set(VARIABLES) - set(NON_CRONOS_VARIABLES)
        assert not unknown, f"{m.id}/{container['name']}: {sorted(unknown)}"
        _settings(EVERYTHING, container)  # and every value decodes


def test_every_volume_mount_names_a_declared_volume() -> None:
    for m in of_kind(EVERYTHING, "Deployment"):
        pod = pod_spec(m.doc)
        volumes = {v["name"] for v in pod.get("volumes", [])}
        mounted = {mount["name"] for c in all_containers(pod) for mount in c.get("volumeMounts", [])}
        assert mounted <= volumes, f"{m.id}: {mounted - volumes}"
        assert volumes <= mounted, f"{m.id}: declared and never mounted: {volumes - mounted}"


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
    api_ports = {p["name"] for p in pod_spec(one(MANIFESTS, "Deployment", "cronos-api"))["containers"][0]["ports"]}
    assert all(p["targetPort"] in api_ports for p in service["spec"]["ports"])


def test_pdbs_leave_room_to_drain_a_node() -> None:
    """A PDB that allows no disruption at the Deployment's size blocks every node drain."""
    for pdb in of_kind(EVERYTHING, "PodDisruptionBudget"):
        spec = pdb.doc["spec"]
        replicas = one(EVERYTHING, "Deployment", pdb.name)["spec"].get("replicas")
        if "minAvailable" in spec:
            assert replicas is not None and spec["minAvailable"] < replicas, pdb.name
        else:
            assert spec["maxUnavailable"] >= 1, pdb.name


def test_config_sets_only_what_the_manifests_need_and_the_defaults_elsewhere() -> None:
    """A ConfigMap value equal to today's default pins it when a release changes the default (the
    executor concurrency stayed at a former default, 16, with KEDA tuned to it): every value is the
    product's default except the deployment's own choices, each with its reason."""
    config = one(MANIFESTS, "ConfigMap", "cronos-config")["data"]
    assert set(config) <= set(VARIABLES), f"unknown variables: {set(config) - set(VARIABLES)}"
    defaults = Settings()
    for name, raw in config.items():
        field = VARIABLES[name][0]
        value, default = getattr(load_settings(environ={name: raw}, env_file=None), field), getattr(defaults, field)
        if name in DEPLOYMENT_CHOICES:
            assert value != default, f"{name} is the default now: drop it from DEPLOYMENT_CHOICES"
        else:
            assert value == default, f"{name}={raw!r}, the product's default is {default!r}"


def test_keda_targets_follow_the_executor_concurrency() -> None:
    """KEDA asks for ceil(pending / target) pods. Pending is the runs in flight and the tokens held
    (up to the prefetch): the target is half the concurrency, so executors more than half busy get
    company, and below the prefetch, so saturated executors do; lag gets a pod per concurrency."""
    for scaled in of_kind(EVERYTHING, "ScaledObject"):
        deployment = one(EVERYTHING, "Deployment", scaled.doc["spec"]["scaleTargetRef"]["name"])
        settings = _settings(EVERYTHING, pod_spec(deployment)["containers"][0])
        triggers = {t["name"]: t["metadata"] for t in scaled.doc["spec"]["triggers"]}
        pending = int(triggers["pending"]["pendingEntriesCount"])
        assert pending == settings.executor_concurrency // 2, scaled.id
        assert pending < settings.executor_prefetch, scaled.id
        assert int(triggers["lag"]["lagCount"]) == settings.executor_concurrency, scaled.id


def test_scaledobject_scales_the_executor_on_its_stream_group() -> None:
    scaled = one(KEDA, "ScaledObject", "cronos-executor")["spec"]
    target = scaled["scaleTargetRef"]
    assert (target.get("kind", "Deployment"), target["name"]) == ("Deployment", "cronos-executor")
    assert one(MANIFESTS, "Deployment", target["name"])  # exists
    prefix = one(MANIFESTS, "ConfigMap", "cronos-config")["data"]["CRONOS_KEY_PREFIX"]
    keys = Keys(prefix)
    triggers = _stream_triggers(scaled)  # and one on the runs due ahead: tests/deploy/test_autoscaling.py
    assert any("pendingEntriesCount" in t["metadata"] for t in triggers)
    secret = one(MANIFESTS, "Secret", "cronos-secrets")["stringData"]
    for trigger in triggers:
        assert trigger["type"] == "redis-streams"
        assert trigger["metadata"]["stream"] == keys.stream
        assert trigger["metadata"]["consumerGroup"] == keys.group
        auth = one(KEDA, "TriggerAuthentication", trigger["authenticationRef"]["name"])
        for ref in auth["spec"]["secretTargetRef"]:
            assert ref["name"] == "cronos-secrets" and ref["key"] in secret
    assert scaled["minReplicaCount"] >= 1 and scaled["maxReplicaCount"] > scaled["minReplicaCount"]


def test_config_decodes_as_cronos_settings() -> None:
    """Every ConfigMap/Secret key Cronos reads is a real variable with a value Settings accepts."""
    config = one(MANIFESTS, "ConfigMap", "cronos-config")["data"]
    secret = one(MANIFESTS, "Secret", "cronos-secrets")["stringData"]
    assert {"DATABASE_URL", "REDIS_URL"} <= set(secret), "connection URLs belong in the Secret"
    assert not {"DATABASE_URL", "REDIS_URL"} & set(config), "connection URLs must not sit in the ConfigMap"
    settings = load_settings(environ={**config, **secret}, env_file=None)
    assert settings.metrics_port == 9102 and settings.log_format == "json"
    for m in of_kind(EVERYTHING, "Deployment"):
        pod = pod_spec(m.doc)
        assert pod["terminationGracePeriodSeconds"] >= settings.drain_timeout_s, m.id
        if "executor" in m.name:
            assert pod["terminationGracePeriodSeconds"] > settings.drain_timeout_s, m.id
        for container in all_containers(pod):
            refs = {next(iter(src.values()))["name"] for src in container["envFrom"]}
            assert refs == {"cronos-config", "cronos-secrets"}, m.id


def test_pods_run_as_non_root() -> None:
    for m in of_kind(EVERYTHING, "Deployment"):
        pod = pod_spec(m.doc)
        assert pod["securityContext"]["runAsNonRoot"] is True, m.id
        for container in all_containers(pod):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True, m.id


def test_the_api_requires_tokens_from_its_own_secret() -> None:
    """CRONOS_AUTH=required on every interface of the pod, and the admin/metrics tokens come from a
    Secret only the API pods read."""
    api = pod_spec(one(MANIFESTS, "Deployment", "cronos-api"))["containers"][0]
    env = {e["name"]: e for e in api["env"]}
    assert env["CRONOS_AUTH"]["value"] == "required"
    # Said out loud: a release may default to loopback while no token is required (protected mode).
    assert env["CRONOS_API_HOST"]["value"] == "0.0.0.0"
    for name in ("CRONOS_ADMIN_TOKEN", "CRONOS_METRICS_TOKEN"):
        ref = env[name]["valueFrom"]["secretKeyRef"]
        assert ref["name"] != "cronos-secrets", "every role reads cronos-secrets: the tokens are the API's alone"
    settings = _settings(MANIFESTS, api)
    assert settings.auth == "required" and settings.admin_token and settings.metrics_token
    shipped = environment(MANIFESTS, api)  # as secret.yaml ships it: placeholders, refused at start
    with pytest.raises(ConfigError, match=r"^CRONOS_ADMIN_TOKEN: must not be a placeholder"):
        load_settings(environ=shipped, env_file=None)
    with pytest.raises(ConfigError, match=r"^CRONOS_METRICS_TOKEN: must not be a placeholder"):
        load_settings(environ=shipped | {"CRONOS_ADMIN_TOKEN": settings.admin_token}, env_file=None)
    assert settings.api_host == "0.0.0.0", "the Service reaches the pod on its own address"
    for m, container in _workloads(EVERYTHING):
        if m.name != "cronos-api" or container["name"] != "api":
            names = set(environment(EVERYTHING, container))
            assert not {"CRONOS_ADMIN_TOKEN", "CRONOS_METRICS_TOKEN"} & names, f"{m.id}/{container['name']}"


def test_each_pool_scales_on_the_streams_of_the_queues_it_serves() -> None:
    """Every ScaledObject, of the base and of each pool, watches exactly the streams of the queues
    its Deployment serves (CRONOS_QUEUES), and pools do not select each other's pods."""
    assert POOL_MANIFESTS, "deploy/k8s/pools holds at least the example pool"
    keys = Keys(one(MANIFESTS, "ConfigMap", "cronos-config")["data"]["CRONOS_KEY_PREFIX"])
    served: dict[str, tuple[str, ...]] = {}
    for scaled in of_kind(EVERYTHING, "ScaledObject"):
        deployment = one(EVERYTHING, "Deployment", scaled.doc["spec"]["scaleTargetRef"]["name"])
        queues = _settings(EVERYTHING, pod_spec(deployment)["containers"][0]).executor_queues
        served[scaled.name] = queues
        streams = {t["metadata"]["stream"] for t in _stream_triggers(scaled.doc["spec"])}
        assert streams == {keys.queue_stream(q) for q in queues}, scaled.name
        assert all(t["metadata"]["consumerGroup"] == keys.group for t in _stream_triggers(scaled.doc["spec"]))
        for trigger in _stream_triggers(scaled.doc["spec"]):
            one(EVERYTHING, "TriggerAuthentication", trigger["authenticationRef"]["name"])
    assert len(served) >= 2 and len({q for qs in served.values() for q in qs}) >= 2
    selectors = [
        tuple(sorted(d.doc["spec"]["selector"]["matchLabels"].items())) for d in of_kind(EVERYTHING, "Deployment")
    ]
    assert len(selectors) == len(set(selectors))
