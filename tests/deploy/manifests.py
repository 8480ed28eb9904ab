"""Loading the deploy/ files for the deploy tests (no Docker or cluster needed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
SCHEMAS = Path(__file__).resolve().parent / "schemas"


@dataclass(frozen=True)
class Manifest:
    file: str
    doc: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.doc["kind"])

    @property
    def name(self) -> str:
        return str(self.doc["metadata"]["name"])

    @property
    def id(self) -> str:
        return f"{self.file}:{self.kind}/{self.name}"


def k8s_manifests() -> list[Manifest]:
    """Every Kubernetes object under deploy/k8s (the kustomization file is not an object)."""
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                found.append(Manifest(path.name, doc))
    return found


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m.kind == kind]


def one(manifests: list[Manifest], kind: str, name: str) -> dict[str, Any]:
    matches = [m.doc for m in manifests if m.kind == kind and m.name == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]
