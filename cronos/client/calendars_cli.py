"""`cronos calendars ...` and `cronos blackouts ...` (issue 25): the business calendars jobs name and
the blackout windows that skip or defer ticks, through /api/calendars and /api/blackouts; and the
options of a timed pause (`cronos jobs pause JOB --until ISO --note TEXT`) and of a job's calendars
(`--calendars holidays,weekdays:allow`). A failure is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cronos.client.api_client import ApiClient
from cronos.client.cli_output import table, when
from cronos.errors import NotFound
from cronos.rules import NAME_PATTERN, WEEKDAYS

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def calendar_refs(raw: str) -> list[dict[str, str]]:
    """`holidays,weekdays:allow` -> [{name, mode}] (mode `exclude` unless `:allow`); `` -> [] (none)."""
    refs = []
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, _, mode = part.partition(":")
        if not re.fullmatch(NAME_PATTERN, name) or mode not in ("", "exclude", "allow"):
            raise argparse.ArgumentTypeError(f"{part!r}: NAME or NAME:allow or NAME:exclude, comma-separated")
        refs.append({"name": name, "mode": mode or "exclude"})
    return refs


def _instant(raw: str) -> str:
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an ISO 8601 instant (2026-03-01T02:00:00Z)") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{raw!r} needs its offset or Z")
    return value.isoformat()


def _list(raw: str) -> list[str]:
    return [p.strip() for p in raw.split(",") if p.strip()]


def _weekdays(raw: str) -> list[str]:
    days = [d.lower() for d in _list(raw)]
    for day in days:
        if day not in WEEKDAYS:
            raise argparse.ArgumentTypeError(f"{day!r} is not one of {', '.join(WEEKDAYS)}")
    return days


def _range(raw: str) -> dict[str, str]:
    start, sep, end = raw.partition("..")
    if not sep:
        raise argparse.ArgumentTypeError(f"{raw!r} is not FROM..TO (2026-12-24..2026-12-26)")
    return {"from": start, "to": end}


def add_pause_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--until", type=_instant, metavar="ISO_INSTANT", help="resume the job at this instant")
    parser.add_argument("--note", help="why it is paused (shown with the job)")


def pause_body(args: argparse.Namespace) -> dict[str, Any] | None:
    """The pause's body, or None (no option: no body, as before)."""
    body = {k: v for k in ("until", "note") if (v := getattr(args, k, None)) is not None}
    return body or None


def add_commands(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    api = "calls the API at $CRONOS_API_URL with $CRONOS_API_TOKEN"
    cals = sub.add_parser("calendars", help=f"business calendars jobs name to exclude or allow days ({api})")
    actions = cals.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=parser_class)
    actions.add_parser("list", help="every calendar")
    actions.add_parser("get", help="one calendar").add_argument("name")
    actions.add_parser("delete", help="delete a calendar (refused while a job names it)").add_argument("name")
    put = actions.add_parser("set", help="create or replace a calendar")
    put.add_argument("name")
    put.add_argument("--timezone", default="UTC", help="the zone its days are in (default UTC)")
    put.add_argument("--dates", type=_list, default=[], metavar="D1,D2", help="dates, YYYY-MM-DD, comma-separated")
    put.add_argument("--range", dest="ranges", type=_range, action="append", default=[], metavar="FROM..TO",
                     help="a range of days, both included (repeatable)")  # fmt: skip
    put.add_argument("--weekdays", type=_weekdays, default=[], metavar="mon,tue", help="weekdays, comma-separated")
    put.add_argument("--description", default="")

    black = sub.add_parser("blackouts", help=f"windows in which ticks are skipped or deferred ({api})")
    bactions = black.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=parser_class)
    bactions.add_parser("list", help="every blackout window")
    bactions.add_parser("delete", help="delete a blackout (deferred ticks are released)").add_argument("blackout")
    create = bactions.add_parser("create", help="a one-off (--from, --to) or recurring (--cron, --duration-s) window")
    create.add_argument("name")
    create.add_argument("--action", dest="do", choices=("skip", "defer"), default="skip")
    create.add_argument("--from", dest="starts_at", type=_instant, metavar="ISO_INSTANT")
    create.add_argument("--to", dest="ends_at", type=_instant, metavar="ISO_INSTANT")
    create.add_argument("--cron", dest="cron_expression", metavar="EXPR", help="each fire time opens a window")
    create.add_argument("--duration-s", type=int, metavar="N", help="how long each recurring window lasts")
    create.add_argument("--timezone", default="UTC")
    create.add_argument("--jobs", type=_list, default=[], metavar="A,B", help="only these jobs (by name)")
    create.add_argument("--queues", dest="selector_queues", type=_list, default=[], metavar="A,B",
                        help="only jobs of these queues")  # fmt: skip
    create.add_argument("--note", default="")
    for parser in (*actions.choices.values(), *bactions.choices.values()):
        parser.add_argument("--json", action="store_true", help="print the API's JSON (for scripts)")


def _calendars_table(items: list[dict[str, Any]]) -> str:
    def days(c: dict[str, Any]) -> str:
        parts = [*c["weekdays"], *c["dates"], *(f"{r['from']}..{r['to']}" for r in c["ranges"])]
        text = ",".join(parts)
        return text if len(text) <= 60 else text[:57] + "..."

    return table(("NAME", "TIMEZONE", "DAYS"), [(c["name"], c["timezone"], days(c)) for c in items])


def _blackouts_table(items: list[dict[str, Any]]) -> str:
    def window(b: dict[str, Any]) -> str:
        if b["cron_expression"] is None:
            return f"{when(b['starts_at'])} .. {when(b['ends_at'])}"
        return f"{b['cron_expression']} for {b['duration_s']}s ({b['timezone']})"

    def selector(b: dict[str, Any]) -> str:
        sel = b["selector"]
        parts = [f"{key}={','.join(sel[key])}" for key in ("jobs", "queues") if sel[key]]
        return " ".join(parts) or "every job"

    rows = [(str(b["id"]), b["name"], b["action"], window(b), selector(b)) for b in items]
    return table(("ID", "NAME", "ACTION", "WINDOW", "JOBS"), rows)


def _blackout_id(api: ApiClient, ref: str) -> int:
    if ref.isascii() and ref.isdigit():
        return int(ref)
    for item in api.call("GET", "/api/blackouts")["items"]:
        if item["name"] == ref:
            return int(item["id"])
    raise NotFound(f"no blackout named {ref!r}")


def run(api: ApiClient, args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    """The API's answer to a `calendars` or `blackouts` action and how to show it to people."""
    if args.command == "calendars":
        if args.action == "list":
            return api.call("GET", "/api/calendars")["items"], _calendars_table
        path = f"/api/calendars/{args.name}"
        if args.action == "get":
            return api.call("GET", path), lambda c: _calendars_table([c])
        if args.action == "delete":
            api.call("DELETE", path)
            return {"deleted": args.name}, lambda _: f"Deleted calendar {args.name}."
        body = {"timezone": args.timezone, "dates": args.dates, "ranges": args.ranges, "weekdays": args.weekdays,
                "description": args.description}  # fmt: skip
        return api.call("PUT", path, body), lambda c: f"Calendar {c['name']} set.\n" + _calendars_table([c])
    if args.action == "list":
        return api.call("GET", "/api/blackouts")["items"], _blackouts_table
    if args.action == "delete":
        api.call("DELETE", f"/api/blackouts/{_blackout_id(api, args.blackout)}")
        return {"deleted": args.blackout}, lambda _: f"Deleted blackout {args.blackout}."
    fields = ("starts_at", "ends_at", "cron_expression", "duration_s")
    body = {"name": args.name, "action": args.do, "timezone": args.timezone, "note": args.note,
            "selector": {"jobs": args.jobs, "queues": args.selector_queues},
            **{k: v for k in fields if (v := getattr(args, k)) is not None}}  # fmt: skip
    return api.call("POST", "/api/blackouts", body), lambda b: f"Blackout {b['id']} created.\n" + _blackouts_table([b])
