"""`cronos runs list` over every job (GET /api/runs) and `cronos runs retry RUN_ID`.

`runs list` takes the API's filters (`--state` repeatable, `--job`, `--queue`, `--trigger`,
`--since`/`--until`); it follows the API's cursor until it holds `--limit` runs (the API may give
short pages for a rare match), at most MAX_PAGES pages, then says on stderr how to go on
(`--cursor`). The table is `cronos runs list JOB`'s, newest run first.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

from cronos.client.api_client import ApiClient
from cronos.errors import CronosError
from cronos.models import RUN_STATES, Trigger

MAX_PAGES = 50  # a rare match in a large ledger: the command stops here and prints the cursor
DEFAULT_SHOWN = 20
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"^(\d{1,7})([smhdw])$")


def instant(raw: str, now: datetime | None = None) -> datetime:
    """`--since`/`--until`: a duration back from now (`90s`, `30m`, `24h`, `7d`, `2w`) or an RFC 3339 time."""
    if match := _DURATION.match(raw):
        return (now or datetime.now(UTC)) - timedelta(seconds=int(match[1]) * _UNITS[match[2]])
    try:
        value = datetime.fromisoformat(raw.upper())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{raw!r} is neither a duration (30m, 24h, 7d) nor a time (2026-03-01T00:00:00Z)"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _limit(raw: str) -> int:
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 10_000:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number of runs from 1 to 10000")
    return int(raw)


def add_list_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", nargs="?", help="only this job's runs (id or name); same as --job")
    parser.add_argument("--job", dest="job_option", metavar="JOB", help="only this job's runs (id or name)")
    parser.add_argument("--state", action="append", choices=RUN_STATES, help="only runs in this state (repeat it)")
    parser.add_argument("--queue", help="only runs of jobs in this queue")
    parser.add_argument("--trigger", choices=get_args(Trigger), help="only runs with this trigger")
    parser.add_argument("--since", type=instant, help="ticks from: 24h, 7d, ... ago, or an RFC 3339 time")
    parser.add_argument("--until", type=instant, help="ticks before: a duration ago or a time")
    parser.add_argument("--limit", type=_limit, default=DEFAULT_SHOWN, help=f"runs at most (default {DEFAULT_SHOWN})")
    parser.add_argument("--cursor", help="go on from where a previous listing stopped")


def add_retry(actions: Any) -> argparse.ArgumentParser:
    retry: argparse.ArgumentParser = actions.add_parser(
        "retry", help="queue the next attempt of a failed, skipped or cancelled run's tick (same idempotency key)"
    )
    retry.add_argument("run", type=int)
    return retry


def list_runs(api: ApiClient, args: argparse.Namespace, job_id: Callable[[ApiClient, str], int]) -> list[Any]:
    """The runs matching the options, newest first, up to --limit (following the API's cursor)."""
    if args.job_option and args.job and args.job_option != args.job:
        raise CronosError(f"runs list: two jobs given ({args.job} and --job {args.job_option}); give one")
    ref = args.job_option or args.job
    query: dict[str, Any] = {
        "job": None if ref is None else job_id(api, ref),
        "state": ",".join(args.state) if args.state else None,
        "queue": args.queue,
        "trigger": args.trigger,
        "from": None if args.since is None else args.since.isoformat(),
        "to": None if args.until is None else args.until.isoformat(),
    }
    runs: list[Any] = []
    cursor = args.cursor
    for _page in range(MAX_PAGES):
        asked = {**query, "limit": min(args.limit - len(runs), 500), "cursor": cursor}
        page = api.call("GET", "/api/runs", query=asked)
        runs += page["items"]
        cursor = page["next_cursor"]
        if cursor is None or len(runs) >= args.limit:
            break
    if cursor is not None:
        print(f"more runs: add --cursor {cursor}", file=sys.stderr)
    return runs


def retry_run(api: ApiClient, args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    run = api.call("POST", f"/api/runs/{args.run}/retry")
    return (
        run,
        lambda r: (
            f"Queued run {r['id']}: attempt {r['attempt']} of job {r['job_id']}'s tick {r['scheduled_for']}"
            f" (see `cronos runs get {r['id']}`)."
        ),
    )
