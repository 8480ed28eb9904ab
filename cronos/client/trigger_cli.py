"""`cronos jobs trigger JOB [--set KEY=VALUE ...] [--payload JSON] [--at ISO_INSTANT]`: run a job now,
optionally with payload overrides (a JSON Merge Patch of the job's payload) and a past tick's logical
date. Without an option it sends no body: a run now with the job's payload, as it always did."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

import msgspec

from cronos.errors import CronosError


def _assignment(raw: str) -> tuple[list[str], Any]:
    """`body.n=2` -> (["body", "n"], 2): the value as JSON when it parses, else as text."""
    path, eq, text = raw.partition("=")
    keys = path.split(".")
    if not eq or not all(keys):
        raise argparse.ArgumentTypeError(f"{raw!r} is not KEY=VALUE (KEY a field, or a dotted path: body.n=2)")
    try:
        value: Any = msgspec.json.decode(text)
    except msgspec.DecodeError:
        value = text
    return keys, value


def json_object(raw: str) -> dict[str, Any]:
    """An argparse type: a JSON object (the trigger's --payload, and jobs create/update's)."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def instant(raw: str) -> str:
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an ISO 8601 instant (2026-03-01T02:00:00Z)") from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{raw!r} needs its offset or Z: a tick is an instant")
    return when.isoformat()


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], type=_assignment, metavar="KEY=VALUE",
        help="override one payload field for this run (a dotted path for a nested one: body.n=2; the value is "
        "JSON when it parses, else text; null removes the field); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--payload", type=json_object, metavar="JSON",
        help="payload overrides as a JSON object, merged over the job's payload (a JSON Merge Patch); then --set",
    )  # fmt: skip
    parser.add_argument(
        "--at", type=instant, metavar="ISO_INSTANT",
        help="re-run this past tick with its logical date and idempotency key (its next attempt)",
    )  # fmt: skip


def body(args: argparse.Namespace) -> dict[str, Any] | None:
    """The trigger's body, or None (no option: no body)."""
    payload: dict[str, Any] = dict(args.payload or {})
    for keys, value in args.overrides:
        place = payload
        for depth, key in enumerate(keys[:-1]):
            place = place.setdefault(key, {})
            if not isinstance(place, dict):
                raise CronosError(f"--set {'.'.join(keys)}: {'.'.join(keys[: depth + 1])} is not an object")
        place[keys[-1]] = value
    sent: dict[str, Any] = {}
    if args.payload is not None or args.overrides:
        sent["payload"] = payload
    if args.at is not None:
        sent["scheduled_for"] = args.at
    return sent or None


def shown(run: dict[str, Any]) -> str:
    """What people read once the run is queued."""
    line = f"Queued run {run['id']} of job {run['job_id']} (see `cronos runs get {run['id']}`)."
    if "inputs" not in run:
        return line
    extra = f"\ntick {run['scheduled_for']}, attempt {run['attempt']}"
    if run["inputs"]:
        extra += f", overrides {msgspec.json.encode(run['inputs']).decode()}"
    return line + extra
