"""`cronos runs cancel RUN_ID`: POST /api/runs/{id}/cancel, one line of what happened."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from cronos.client.api_client import ApiClient


def add_command(run_actions: Any) -> argparse.ArgumentParser:
    cancel = run_actions.add_parser(
        "cancel", help="cancel a run: a queued or waiting one at once, a running one through its executor"
    )
    cancel.add_argument("run", type=int)
    return cancel  # type: ignore[no-any-return]


def cancel_run(api: ApiClient, args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    run = api.call("POST", f"/api/runs/{args.run}/cancel")
    return run, _said


def _said(run: dict[str, Any]) -> str:
    if run["state"] == "cancelled":
        return f"Run {run['id']} of job {run['job_id']} is cancelled."
    return (
        f"Run {run['id']} of job {run['job_id']} is {run['state']}: its executor was asked to stop it "
        f"(see `cronos runs get {run['id']}`)."
    )
