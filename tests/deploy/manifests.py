"""Loading the deploy/ files for the deploy tests (no Docker or cluster needed)."""

from __future__ import annotations

import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronos.settings import TOKEN_VARIABLES
from tests.deploy.kustomize import render

ROOT = Path(__file__).resolve().parents[2]
# The release's version, where it is set (pyproject.toml): `cronos --version`, /health and the image's label.
VERSION = str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
POOLS = K8S / "pools"
AUTOSCALING = K8S / "autoscaling"
SCHEMAS = Path(__file__).resolve().parent / "schemas"


@dataclass(frozen=True)
class Manifest:
    source: str  # the kustomization it was rendered from, relative to deploy/k8s
    doc: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.doc["kind"])

    @property
    def name(self) -> str:
        return str(self.doc["metadata"]["name"])

    @property
    def id(self) -> str:
        return f"{self.source}:{self.kind}/{self.name}"


def rendered(directory: Path) -> list[Manifest]:
    """The objects `kubectl apply -k directory` applies (tests/deploy/kustomize.py renders them)."""
    source = str(directory.relative_to(K8S)) if directory != K8S else "."
    return [Manifest(source, doc) for doc in render(directory)]


def k8s_manifests() -> list[Manifest]:
    """Every object of the base, `kubectl apply -k deploy/k8s`."""
    return rendered(K8S)


def pool_manifests() -> list[Manifest]:
    """Every object of each executor pool, `kubectl apply -k deploy/k8s/pools/<queue>` (after the base)."""
    return [m for pool in sorted(p for p in POOLS.iterdir() if p.is_dir()) for m in rendered(pool)]


def overlays() -> list[Path]:
    """Every kustomization applied after the base: autoscaling/keda, autoscaling/hpa, pools/<queue>."""
    return sorted(p.parent for p in K8S.glob("*/*/kustomization.yaml"))


def overlay_manifests(kind: str) -> list[Manifest]:
    """Every object of the overlays under deploy/k8s/<kind> (`autoscaling`, `pools`)."""
    return [m for directory in overlays() if directory.parent.name == kind for m in rendered(directory)]


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def all_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Init containers, then containers."""
    return [*pod.get("initContainers", []), *pod["containers"]]


def environment(manifests: list[Manifest], container: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet builds it: envFrom sources, then env (which wins)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env |= one(manifests, "ConfigMap", source["configMapRef"]["name"])["data"]
        else:
            env |= one(manifests, "Secret", source["secretRef"]["name"])["stringData"]
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in var["valueFrom"]:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = one(manifests, "Secret", ref["name"])["stringData"][ref["key"]]
        else:
            env[var["name"]] = "pod-name"  # fieldRef: metadata.name
    return env


def operator_environment(manifests: list[Manifest], container: dict[str, Any]) -> dict[str, str]:
    """The environment once the operator has put real tokens in the Secret (secret.yaml ships
    placeholders, which every role refuses at start): a random token for each token setting."""
    env = environment(manifests, container)
    return env | {name: secrets.token_hex(32) for name in TOKEN_VARIABLES if env.get(name)}


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m.kind == kind]


def one(manifests: list[Manifest], kind: str, name: str) -> dict[str, Any]:
    matches = [m.doc for m in manifests if m.kind == kind and m.name == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]
