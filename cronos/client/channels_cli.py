"""`cronos channels add|list|show|delete|test`: notification channels through the REST API.

`add` builds the channel from options (`--webhook URL`, `--slack URL` or `--email TO,...` with
`--smtp-*`), attached to every job unless `--job`, `--queue` or `--selector` name some; `test` queues a test
notification, then waits (`--wait`, default 30 s) for the leader to send it and says how it
went. Secrets are never printed (the API shows them as ***), except a webhook's signing secret
drawn at creation, shown that once. An SMTP password is read from an environment variable
(`--smtp-password-env`), never from the command line (other users' `ps` would show it).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import TYPE_CHECKING, Any

import msgspec

from cronos.client.api_client import ApiClient
from cronos.client.cli_output import table, when
from cronos.client.jobs_cli import client, job_id
from cronos.errors import CronosError, InvalidInput, NotFound
from cronos.events import JobEventKind
from cronos.settings import Settings

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

EVENTS = tuple(str(kind) for kind in JobEventKind)
_AGE = re.compile(r"(\d{1,7})([smhd]?)")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}
_QUIET = re.compile(r"(\d\d:\d\d)-(\d\d:\d\d)")
_DELIVERIES_SHOWN = 20


def _events(raw: str) -> list[str]:
    names = [part.strip() for part in raw.split(",") if part.strip()]
    unknown = [name for name in names if name not in EVENTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"events are among {', '.join(EVENTS)}")
    return names


def _seconds(raw: str) -> int:
    match = _AGE.fullmatch(raw.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a duration such as 600, 10m, 1h, 1d")
    return int(match[1]) * _UNIT_S[match[2]]


def _quiet(raw: str) -> tuple[str, str]:
    match = _QUIET.fullmatch(raw.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{raw!r} is not HH:MM-HH:MM (e.g. 22:00-07:00)")
    return match[1], match[2]


def add_commands(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    channels = sub.add_parser("channels", help="notification channels: add, list, show (with deliveries), delete, test")
    actions = channels.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=parser_class)
    add = actions.add_parser("add", help="add a channel: a signed webhook, a Slack incoming webhook or email")
    add.add_argument("name")
    target = add.add_mutually_exclusive_group(required=True)
    target.add_argument("--webhook", metavar="URL", help="POST signed JSON (Standard Webhooks) to URL")
    target.add_argument("--slack", metavar="URL", help="a Slack-compatible incoming-webhook URL (kept secret)")
    target.add_argument("--email", metavar="TO,...", help="email these addresses (needs --smtp-host and --from)")
    add.add_argument("--secret", help="webhook: its signing secret (whsec_...); default: one is drawn and shown once")
    add.add_argument("--smtp-host")
    add.add_argument("--smtp-port", type=int, default=587)
    add.add_argument("--smtp-security", choices=("starttls", "ssl", "none"), default="starttls")
    add.add_argument("--smtp-user")
    add.add_argument("--smtp-password-env", metavar="VAR", help="read the SMTP password from this variable")
    add.add_argument("--from", dest="sender", metavar="ADDRESS", help="email: the sender address")
    add.add_argument(
        "--job", dest="jobs", action="append", metavar="JOB", help="only this job, id or name (repeatable)"
    )
    add.add_argument(
        "--queue", dest="channel_queues", action="append", metavar="QUEUE", help="only this queue's jobs (repeatable)"
    )
    add.add_argument("-l", "--selector", help="also the jobs whose labels match (team=data,env!=dev)")
    add.add_argument(
        "--on",
        dest="events",
        type=_events,
        metavar="EVENT,...",
        help="the events it hears of (default failed,recovered,missed): " + ", ".join(EVENTS),
    )
    add.add_argument("--after-failures", type=int, metavar="N", help="failed: only after N failures in a row")
    add.add_argument("--rate-limit", type=_seconds, metavar="DURATION", help="at most one per job per (10m, 1h)")
    add.add_argument("--quiet", type=_quiet, metavar="HH:MM-HH:MM", help="quiet hours: held until they end")
    add.add_argument("--quiet-tz", default="UTC", metavar="ZONE", help="the quiet hours' time zone (default UTC)")
    add.add_argument("--quiet-drop", action="store_true", help="drop what comes in the quiet hours instead")
    actions.add_parser("list", help="every channel: kind, target, what it applies to, events, rules")
    for action, text in (("show", "one channel and its recent deliveries"), ("delete", "delete a channel")):
        actions.add_parser(action, help=text).add_argument("channel", help="id or name")
    test = actions.add_parser("test", help="send a test notification and say how it went")
    test.add_argument("channel", help="id or name")
    test.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="wait this long for the leader to send it (0: queue it and return)",
    )
    for parser in actions.choices.values():
        parser.add_argument("--json", action="store_true", help="print the API's JSON (for scripts)")


def channel_id(api: ApiClient, ref: str) -> int:
    if ref.isascii() and ref.isdigit():
        return int(ref)
    for channel in api.call("GET", "/api/channels")["items"]:
        if channel["name"] == ref:
            return int(channel["id"])
    raise NotFound(f"no channel named {ref!r}")


def _body(api: ApiClient, args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"name": args.name}
    if args.webhook:
        body.update(kind="webhook", url=args.webhook)
        if args.secret:
            body["secret"] = args.secret
    elif args.slack:
        body.update(kind="slack", url=args.slack)
    else:
        if not args.smtp_host or not args.sender:
            raise InvalidInput("--email", "needs --smtp-host and --from")
        to = [address.strip() for address in args.email.split(",") if address.strip()]
        smtp: dict[str, Any] = {"host": args.smtp_host, "port": args.smtp_port, "security": args.smtp_security,
                                "from": args.sender, "to": to}  # fmt: skip
        if args.smtp_user:
            smtp["user"] = args.smtp_user
        if args.smtp_password_env:
            if args.smtp_password_env not in os.environ:
                raise InvalidInput("--smtp-password-env", f"${args.smtp_password_env} is not set")
            smtp["password"] = os.environ[args.smtp_password_env]
        body.update(kind="email", smtp=smtp)
    if args.jobs:
        body["jobs"] = [job_id(api, ref) for ref in args.jobs]
    if args.channel_queues:  # not `queues`: the CLI reads that one as an executor's --queue
        body["queues"] = args.channel_queues
    if args.selector:
        body["selector"] = args.selector
    if args.events:
        body["events"] = args.events
    if args.after_failures is not None:
        body["after_failures"] = args.after_failures
    if args.rate_limit is not None:
        body["rate_limit_s"] = args.rate_limit
    if args.quiet:
        body["quiet_hours"] = {"start": args.quiet[0], "end": args.quiet[1], "timezone": args.quiet_tz,
                               "hold": not args.quiet_drop}  # fmt: skip
    return body


def _target(channel: dict[str, Any]) -> str:
    if channel["kind"] == "email" and channel.get("smtp"):
        return ",".join(channel["smtp"]["to"]) + f" via {channel['smtp']['host']}"
    return str(channel.get("url") or "-")


def _scope(channel: dict[str, Any]) -> str:
    parts = []
    if channel.get("jobs") is not None:
        parts.append("jobs " + ",".join(map(str, channel["jobs"])))
    if channel.get("queues") is not None:
        parts.append("queues " + ",".join(channel["queues"]))
    if channel.get("selector") is not None:
        parts.append("labels " + channel["selector"])
    return "; ".join(parts) or "every job"


def _rules(channel: dict[str, Any]) -> str:
    rules = []
    if channel["after_failures"] > 1:
        rules.append(f"after {channel['after_failures']} failures")
    if channel["rate_limit_s"]:
        rules.append(f"1 per {channel['rate_limit_s']}s")
    if quiet := channel.get("quiet_hours"):
        rules.append(f"quiet {quiet['start']}-{quiet['end']} {quiet['timezone']}" + ("" if quiet["hold"] else " drop"))
    if not channel["enabled"]:
        rules.append("disabled")
    return ", ".join(rules) or "-"


def _channels_table(channels: list[dict[str, Any]]) -> str:
    header = ("ID", "NAME", "KIND", "TARGET", "APPLIES TO", "EVENTS", "RULES")
    rows = [(str(c["id"]), c["name"], c["kind"], _target(c), _scope(c), ",".join(c["events"]), _rules(c))
            for c in channels]  # fmt: skip
    return table(header, rows)


def _deliveries_table(deliveries: list[dict[str, Any]]) -> str:
    header = ("ID", "EVENT", "JOB", "STATE", "ATTEMPTS", "CREATED", "DUE / SENT", "ERROR OR REASON")
    rows = [
        (str(d["id"]), d["kind"], str(d["job_id"] or "-"), d["state"], str(d["attempts"]), when(d["created_at"]),
         when(d["sent_at"] or d["due_at"]), (d["last_error"] or d["reason"] or "")[:80])
        for d in deliveries
    ]  # fmt: skip
    return table(header, rows)


def _show(channel: dict[str, Any]) -> str:
    text = _channels_table([channel])
    if channel.get("webhook_secret"):
        text += f"\n\nwebhook signing secret (shown this once): {channel['webhook_secret']}"
    if "deliveries" in channel:
        text += "\n\nrecent deliveries:\n" + _deliveries_table(channel["deliveries"])
    return text


def _test(api: ApiClient, ref: str, wait_s: float) -> tuple[dict[str, Any], int]:
    cid = channel_id(api, ref)
    delivery = api.call("POST", f"/api/channels/{cid}/test")
    deadline = time.monotonic() + wait_s
    while delivery["state"] == "pending" and time.monotonic() < deadline:
        time.sleep(0.2)
        found = [d for d in api.call("GET", f"/api/channels/{cid}/deliveries")["items"] if d["id"] == delivery["id"]]
        delivery = found[0] if found else delivery
    return delivery, 0 if delivery["state"] == "sent" or wait_s == 0 else 1


def _test_line(delivery: dict[str, Any]) -> str:
    if delivery["state"] == "sent":
        return f"Test notification {delivery['id']} sent."
    if delivery["state"] == "failed":
        return (
            f"Test notification {delivery['id']} failed after {delivery['attempts']} attempts: {delivery['last_error']}"
        )
    tried = f" (attempt {delivery['attempts']}: {delivery['last_error']})" if delivery["last_error"] else ""
    return f"Test notification {delivery['id']} is queued, not sent yet{tried}; see `cronos channels show`."


def run_channels(args: argparse.Namespace, settings: Settings) -> int:
    api = client(settings)
    code = 0
    if args.action == "add":
        answer: Any = api.call("POST", "/api/channels", _body(api, args))
        text = _show(answer)
    elif args.action == "list":
        answer = api.call("GET", "/api/channels")["items"]
        text = _channels_table(answer)
    elif args.action == "show":
        cid = channel_id(api, args.channel)
        answer = api.call("GET", f"/api/channels/{cid}")
        answer["deliveries"] = api.call("GET", f"/api/channels/{cid}/deliveries", query={"limit": _DELIVERIES_SHOWN})[
            "items"
        ]
        text = _show(answer)
    elif args.action == "delete":
        api.call("DELETE", f"/api/channels/{channel_id(api, args.channel)}")
        answer, text = {"deleted": args.channel}, f"Deleted channel {args.channel}."
    elif args.action == "test":
        answer, code = _test(api, args.channel, max(0.0, args.wait))
        text = _test_line(answer)
    else:  # argparse allows no other
        raise CronosError(f"channels: unknown action {args.action!r}")
    print(msgspec.json.format(msgspec.json.encode(answer), indent=2).decode() if args.json else text)
    return code
