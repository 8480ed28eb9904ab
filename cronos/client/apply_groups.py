"""`concurrency_groups:` in jobs files: `cronos apply` creates the groups a file names, or sets their
limits, before it applies the jobs (a job may name a group only once it exists).

    concurrency_groups:
      warehouse: 2        # at most 2 runs of the jobs naming `warehouse` at once
    jobs:
      - name: load-orders
        concurrency_group: warehouse
        ...

A group no file names is left alone (other files or people may use it); delete it with
`cronos groups delete NAME` once no job names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cronos.client.api_client import ApiClient, ApiError
from cronos.client.jobs_file import ApplyInvalid


def desired_groups(documents: Sequence[tuple[str, Any]]) -> dict[str, tuple[int, str]]:
    """Each group the (validated) files name: its limit and the file; two limits for one group refused."""
    found: dict[str, tuple[int, str]] = {}
    for source, document in documents:
        for name, limit in (document.get("concurrency_groups") or {}).items():
            if name in found and found[name][0] != limit:
                raise ApplyInvalid(
                    f"{source}: concurrency_groups.{name}: limit {limit} here, {found[name][0]} in {found[name][1]}"
                )
            found[name] = (int(limit), source)
    return found


def plan_groups(desired: Mapping[str, tuple[int, str]], current: Mapping[str, int]) -> list[tuple[str, str, int]]:
    """(step, group, limit) for each group the files name: create, update (its limit) or unchanged."""
    steps = []
    for name, (limit, _source) in sorted(desired.items()):
        step = "create" if name not in current else "unchanged" if current[name] == limit else "update"
        steps.append((step, name, limit))
    return steps


def apply_groups(api: ApiClient, documents: Sequence[tuple[str, Any]], *, dry_run: bool) -> list[str]:
    """Carry out (unless `dry_run`) the groups' steps; the lines to print."""
    desired = desired_groups(documents)
    if not desired:
        return []
    current = {g["name"]: g["limit"] for g in api.call("GET", "/api/concurrency-groups")["items"]}
    lines = []
    for step, name, limit in plan_groups(desired, current):
        if step != "unchanged" and not dry_run:
            try:
                api.call("PUT", f"/api/concurrency-groups/{name}", {"limit": limit})
            except ApiError as exc:
                raise ApplyInvalid(f"{desired[name][1]}: concurrency group {name!r}: {step} refused: {exc}") from None
        lines.append(f"{step:<9}  concurrency group {name}: limit {limit}")
    return lines
