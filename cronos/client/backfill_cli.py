"""`cronos jobs backfill JOB --from T --to T [--mode missing|failed|all] [--dry-run] [--pace N]`: queue runs
for a job's past ticks in [from, to), as its schedule was then (POST /api/jobs/{id}/backfill)."""

from __future__ import annotations

import argparse
from typing import Any

from cronos.client.cli_output import counted, table, when
from cronos.client.trigger_cli import instant


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="start",
        required=True,
        type=instant,
        metavar="ISO_INSTANT",
        help="the first instant of the range (ticks at or after it)",
    )
    parser.add_argument(
        "--to",
        dest="end",
        required=True,
        type=instant,
        metavar="ISO_INSTANT",
        help="the end of the range (ticks before it); not after now",
    )
    parser.add_argument(
        "--mode",
        choices=("missing", "failed", "all"),
        default="missing",
        help="missing: ticks no run of which started (default); failed: whose last attempt failed",
    )
    parser.add_argument("--dry-run", action="store_true", help="list the ticks it would queue; queue nothing")
    parser.add_argument("--pace", type=float, metavar="PER_S",
                        help="runs released per second (default: the job's catch-up pace)")  # fmt: skip


def body(args: argparse.Namespace) -> dict[str, Any]:
    sent: dict[str, Any] = {"from": args.start, "to": args.end, "mode": args.mode, "dry_run": args.dry_run}
    if args.pace is not None:
        sent["pace"] = args.pace
    return sent


def shown(answer: dict[str, Any]) -> str:
    """The ticks chosen, then one line saying what happened."""
    rows = [
        (when(t["scheduled_for"]), t["state"], str(t["attempt"]), t["action"],
         when(t["due_at"], "-"), "-" if t.get("run_id") is None else str(t["run_id"]))
        for t in answer["items"]
    ]  # fmt: skip
    head = table(("TICK", "STATE", "ATTEMPT", "ACTION", "DUE", "RUN"), rows) + "\n" if rows else ""
    verb = "would queue" if answer["dry_run"] else "queued"
    return head + (
        f"{counted(answer['ticks'], 'tick')} in the range, {len(answer['items'])} chosen ({answer['mode']}); "
        f"{verb} {answer['queued']} at {answer['pace']:g}/s"
    )
