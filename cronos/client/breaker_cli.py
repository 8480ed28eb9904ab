"""`cronos jobs breaker JOB [--failures N|default] [--canary-every M|default]`: a job's own circuit
breaker (its `expectations.breaker`, docs/breaker.md). Only the settings given change: the job's
other expectations and the other breaker setting are kept as they are."""

from __future__ import annotations

import argparse
from typing import Any

from cronos.client.api_client import ApiClient

DEFAULT = "default"  # the setting's own value removed: the cluster's applies


def _count(text: str) -> int | None:
    """A count of 0 or more, or `default` (None: remove the job's own)."""
    if text == DEFAULT:
        return None
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number (0 or more) or `{DEFAULT}`")
    return int(text)


def add_commands(actions: Any) -> None:
    parser = actions.add_parser("breaker", help="show or set a job's own circuit breaker (docs/breaker.md)")
    parser.add_argument("job", help="id or name")
    failures = "pause after N failed runs in a row (0: never; default: the cluster's)"
    canary = "while paused by the breaker, one run every M ticks; it resumes when one succeeds (0: none)"
    parser.add_argument("--failures", type=_count, default=argparse.SUPPRESS, metavar="N|default", help=failures)
    parser.add_argument("--canary-every", type=_count, default=argparse.SUPPRESS, metavar="M|default", help=canary)


def merged(expectations: dict[str, Any] | None, given: dict[str, int | None]) -> dict[str, Any] | None:
    """The job's expectations with the breaker settings `given` set (None: removed), the rest kept."""
    out = dict(expectations or {})
    breaker = {k: v for k, v in {**out.get("breaker", {}), **given}.items() if v is not None}
    out.pop("breaker", None)
    if breaker:
        out["breaker"] = breaker
    return out or None


def shown(job: dict[str, Any]) -> str:
    own = (job.get("expectations") or {}).get("breaker") or {}
    applies = job.get("breaker") or {}  # GET's: the one that applies (its own, its queue's, the cluster's)
    failures = own.get("failures")
    said = "the cluster's failures in a row" if failures is None else f"{failures} failed runs in a row"
    if failures is None and applies.get("failures"):
        said = f"{applies['failures']} failed runs in a row (its queue's or the cluster's default)"
    if failures == 0 or (failures is None and applies.get("failures") == 0):
        said = "never (off for this job)" if failures == 0 else "never (no default applies)"
    canary = own.get("canary_every", applies.get("canary_every"))
    then = f"; a canary run every {canary} ticks while paused by it" if canary else "; no canary"
    return f"Job {job['id']} {job['name']!r}: the breaker pauses it after {said}{then}."


def run(api: ApiClient, args: argparse.Namespace, path: str) -> tuple[Any, Any]:
    given = {name: getattr(args, name) for name in ("failures", "canary_every") if hasattr(args, name)}
    job = api.call("GET", path)
    if given:
        job = api.call("PATCH", path, {"expectations": merged(job.get("expectations"), given)})
    return job, shown
