"""The part of kustomize that deploy/k8s uses, in Python: what `kubectl apply -k DIR` would apply.

No kubectl is installed where the tests run, so the tests render the kustomizations themselves:
`resources` (manifest files, or directories holding a kustomization of their own), `images`
(`name` -> `newName`/`newTag`/`digest` on every container and init container) and `labels`
(`pairs` on each object's metadata). Any other field, or a labels option that reaches selectors
or pod templates, is refused, so a kustomization that outgrows this subset fails the tests
instead of rendering differently from kustomize. Where kubectl is on PATH, test_k8s.py also
renders with `kubectl kustomize` and compares the two.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Object = dict[str, Any]

SUPPORTED = {"apiVersion", "kind", "resources", "images", "labels"}
_WORKLOAD_CONTAINERS = ("containers", "initContainers")


class Unsupported(ValueError):
    """A kustomization uses something this subset does not render."""


def render(directory: Path) -> list[Object]:
    """The objects `kubectl kustomize directory` prints (in file order, not kustomize's kind order)."""
    kustomization: Object = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - SUPPORTED
    if unknown:
        raise Unsupported(f"{directory}/kustomization.yaml: {sorted(unknown)} is not rendered here")
    objects: list[Object] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        if path.is_dir():
            objects += render(path)
        else:
            objects += [copy.deepcopy(doc) for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    for label in kustomization.get("labels", []):
        if label.get("includeSelectors") or label.get("includeTemplates") or set(label) - {"pairs"}:
            raise Unsupported(f"{directory}: labels {label} (only `pairs` on metadata is rendered)")
        for obj in objects:
            obj.setdefault("metadata", {}).setdefault("labels", {}).update(label["pairs"])
    for image in kustomization.get("images", []):
        for obj in objects:
            _set_image(obj, image)
    ids = [object_id(obj) for obj in objects]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise Unsupported(f"{directory}: objects defined twice: {sorted(duplicates)}")  # kustomize refuses too
    return objects


def object_id(obj: Object) -> tuple[str, str, str]:
    return (str(obj["apiVersion"]), str(obj["kind"]), str(obj["metadata"]["name"]))


def image_name(reference: str) -> str:
    """`registry:5000/team/cronos:1.2@sha256:…` -> `registry:5000/team/cronos` (kustomize matches on this)."""
    name = reference.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def _set_image(node: Any, image: Object) -> None:
    """Every `image` of a container or init container list anywhere in `node` (pod specs, templates)."""
    if isinstance(node, list):
        for item in node:
            _set_image(item, image)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in _WORKLOAD_CONTAINERS and isinstance(value, list):
            for container in value:
                if isinstance(container, dict) and "image" in container:
                    container["image"] = _replaced(container["image"], image)
        _set_image(value, image)


def _replaced(reference: str, image: Object) -> str:
    if image_name(reference) != image["name"]:
        return reference
    name = image.get("newName", image["name"])
    rest = reference[len(image["name"]) :]
    if "digest" in image:
        return f"{name}@{image['digest']}"
    if "newTag" in image:
        return f"{name}:{image['newTag']}"
    return f"{name}{rest}"
