"""`cronos jobs triggers create|list|revoke JOB`: a job's trigger URLs (POST /hooks/{id} starts a run
with no API token). `create` prints the secret once, on the last line, for scripts."""

from __future__ import annotations

import argparse
from typing import Any

from cronos.client.api_client import ApiClient
from cronos.client.cli_output import table
from cronos.errors import CronosError


def add_commands(actions: Any) -> None:
    triggers = actions.add_parser("triggers", help="trigger URLs of a job: create (secret shown once), list, revoke")
    triggers.add_argument("verb", choices=("create", "list", "revoke"))
    triggers.add_argument("job", help="id or name")
    triggers.add_argument("trigger", nargs="?", type=int, help="revoke: the trigger's id")
    triggers.add_argument("--name", default="ci", help="create: the trigger's name (default ci)")
    triggers.add_argument(
        "--signed",
        action="store_true",
        help="create: calls must be signed (Standard Webhooks headers keyed with the secret)",
    )
    triggers.add_argument("--rate", type=int, default=60, metavar="N", help="create: calls a minute (default 60)")


def _listed(answer: dict[str, Any]) -> str:
    rows = [(str(t["id"]), t["name"], "signed" if t["signed"] else "bearer", str(t["rate_per_minute"]),
             t["created_by"], "revoked" if t["revoked_at"] else "live") for t in answer["items"]]  # fmt: skip
    return table(("ID", "NAME", "AUTH", "RATE/MIN", "CREATED BY", "STATE"), rows) if rows else "No triggers."


def _created(t: dict[str, Any]) -> str:
    how = "sign calls with it (webhook-* headers)" if t["signed"] else "send it as `Authorization: Bearer <secret>`"
    return f"Trigger {t['id']} {t['name']!r}: POST {t['url']}; its secret, shown this once ({how}):\n{t['secret']}"


def run(api: ApiClient, args: argparse.Namespace, path: str) -> tuple[Any, Any]:
    if args.verb == "create":
        body = {"name": args.name, "signed": args.signed, "rate_per_minute": args.rate}
        return api.call("POST", f"{path}/triggers", body), _created
    if args.verb == "list":
        return api.call("GET", f"{path}/triggers"), _listed
    if args.trigger is None:
        raise CronosError("jobs triggers revoke JOB TRIGGER: give the trigger's id")
    api.call("DELETE", f"{path}/triggers/{args.trigger}")
    return {"revoked": args.trigger}, lambda _: f"Revoked trigger {args.trigger}."
