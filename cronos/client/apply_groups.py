"""Named things jobs files declare beside their jobs, which `cronos apply` creates or sets before it
applies the jobs (a job may name one only once it exists):

    concurrency_groups:
      warehouse: 2        # at most 2 runs of the jobs naming `warehouse` at once
    calendars:
      holidays:           # a job's `calendars: [{name: holidays}]` skips these days
        timezone: Europe/Paris
        dates: [2026-12-25, 2027-01-01]
    jobs:
      - name: load-orders
        concurrency_group: warehouse
        calendars: [{name: holidays}]
        ...

One no file names is left alone (other files or people may use it); delete it with
`cronos groups delete NAME` or `cronos calendars delete NAME` once no job names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cronos.client.api_client import ApiClient, ApiError
from cronos.client.jobs_file import ApplyInvalid

_CALENDAR_FIELDS = {"timezone": "UTC", "dates": [], "ranges": [], "weekdays": [], "description": ""}


@dataclass(frozen=True, slots=True)
class Named:
    """One kind of named thing: the file's key, its API and how a value is compared and shown."""

    key: str  # the file's top-level key
    what: str  # in messages
    path: str  # its collection in the API; PUT {path}/{name} creates or sets one
    value: Callable[[Any], Any]  # a file's or the API's entry, as compared
    body: Callable[[Any], Any]  # the PUT body of a value
    shown: Callable[[Any], str]


GROUPS = Named(
    "concurrency_groups", "concurrency group", "/api/concurrency-groups",
    value=lambda entry: int(entry["limit"] if isinstance(entry, Mapping) else entry),
    body=lambda limit: {"limit": limit}, shown=lambda limit: f"limit {limit}",
)  # fmt: skip
CALENDARS = Named(
    "calendars", "calendar", "/api/calendars",
    value=lambda entry: {k: entry.get(k, default) for k, default in _CALENDAR_FIELDS.items()},
    body=lambda days: days,
    shown=lambda days: ", ".join(f"{len(days[k])} {k}" for k in ("dates", "ranges", "weekdays"))
    + f" in {days['timezone']}",
)  # fmt: skip


def desired_named(kind: Named, documents: Sequence[tuple[str, Any]]) -> dict[str, tuple[Any, str]]:
    """Each one the (validated) files name: its value and the file; two values for one name refused."""
    found: dict[str, tuple[Any, str]] = {}
    for source, document in documents:
        for name, entry in (document.get(kind.key) or {}).items():
            value = kind.value(entry)
            if name in found and found[name][0] != value:
                raise ApplyInvalid(
                    f"{source}: {kind.key}.{name}: {kind.shown(value)} here, {kind.shown(found[name][0])} in "
                    f"{found[name][1]}"
                )
            found[name] = (value, source)
    return found


def plan_named(desired: Mapping[str, tuple[Any, str]], current: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """(step, name, value) for each one the files name: create, update or unchanged."""
    steps = []
    for name, (value, _source) in sorted(desired.items()):
        step = "create" if name not in current else "unchanged" if current[name] == value else "update"
        steps.append((step, name, value))
    return steps


def desired_groups(documents: Sequence[tuple[str, Any]]) -> dict[str, tuple[int, str]]:
    return desired_named(GROUPS, documents)


def plan_groups(desired: Mapping[str, tuple[int, str]], current: Mapping[str, int]) -> list[tuple[str, str, int]]:
    return plan_named(desired, current)


def apply_named(api: ApiClient, documents: Sequence[tuple[str, Any]], *, dry_run: bool) -> list[str]:
    """Carry out (unless `dry_run`) the steps of the groups, then the calendars; the lines to print."""
    lines = []
    for kind in (GROUPS, CALENDARS):
        desired = desired_named(kind, documents)
        if not desired:
            continue
        current = {item["name"]: kind.value(item) for item in api.call("GET", kind.path)["items"]}
        for step, name, value in plan_named(desired, current):
            if step != "unchanged" and not dry_run:
                try:
                    api.call("PUT", f"{kind.path}/{name}", kind.body(value))
                except ApiError as exc:
                    raise ApplyInvalid(f"{desired[name][1]}: {kind.what} {name!r}: {step} refused: {exc}") from None
            lines.append(f"{step:<9}  {kind.what} {name}: {kind.shown(value)}")
    return lines
