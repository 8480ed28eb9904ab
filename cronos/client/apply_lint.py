"""`cronos apply`'s schedule notes: for each job it creates or whose schedule it changes, the API's
preview warnings (docs/schedule-lint.md) and, for a change, the ticks of the next 7 days it adds
and removes. Printed under the plan's line, with `--dry-run` before anything is written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cronos.client.api_client import ApiClient
from cronos.client.apply import Action, Step

PAD = " " * 11  # under the plan line's name
SHOWN = 5  # ticks listed per side of a diff


def _when(tick: Mapping[str, Any]) -> str:
    dst = tick.get("dst")
    return f"{tick['local']}" + (f" ({dst['detail']})" if dst else "")


def schedule_notes(api: ApiClient, action: Action, have: Mapping[str, Any] | None) -> list[str]:
    """The lines to print under `action`'s plan line (none when its schedule does not change)."""
    body = action.body or {}
    if action.step not in (Step.CREATE, Step.UPDATE) or not {"cron_expression", "timezone", "spread"} & body.keys():
        return []
    before = have or {}
    expression = body.get("cron_expression", before.get("cron_expression"))
    if expression is None:
        return []  # a one-off
    query: dict[str, str | int | None] = {
        "cron_expression": expression,
        "timezone": body.get("timezone", before.get("timezone", "UTC")),
        "count": 1,
        "job": action.name,  # an `H` takes the values the job's name picks (cronos.hashed)
        "previous_cron_expression": before.get("cron_expression"),
        "previous_timezone": before.get("timezone"),
        "spread": body.get("spread", before.get("spread")),  # each tick moved by the name's offset (cronos.spread)
    }
    preview = api.call("GET", "/api/schedule/preview", query=query)
    lines = [f"{PAD}{preview['cron_expression']} ({preview['timezone']}): {preview['description']}"]
    for warning in preview["warnings"]:
        lines.append(f"{PAD}warning {warning['code']}: {warning['message']}")
        if warning.get("suggestion"):
            lines.append(f"{PAD}  suggestion: {warning['suggestion']}")
    diff = preview.get("diff")
    if diff is not None:
        more = " (more not counted)" if diff["partial"] else ""
        until = diff["until"][:16].replace("T", " ")
        counts = f"{len(diff['added'])} added, {len(diff['removed'])} removed, {diff['kept']} kept{more}"
        lines.append(f"{PAD}ticks until {until} UTC: {counts}")
        for sign, ticks in (("+", diff["added"]), ("-", diff["removed"])):
            lines += [f"{PAD}  {sign} {_when(tick)}" for tick in ticks[:SHOWN]]
            if len(ticks) > SHOWN:
                lines.append(f"{PAD}  {sign} … {len(ticks) - SHOWN} more")
    return lines
