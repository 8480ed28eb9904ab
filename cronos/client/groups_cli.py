"""`cronos groups list|get|set|delete`: concurrency groups over the API (/api/concurrency-groups).

cronos groups set warehouse --limit 2      # create it, or change its limit
cronos groups get warehouse                # its limit, the runs holding its slots, those waiting
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import msgspec

from cronos.client.api_client import ApiClient
from cronos.client.cli_output import table, when
from cronos.settings import Settings

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _limit(raw: str) -> int:
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 100_000:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a limit from 1 to 100000")
    return int(raw)


def add_commands(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    groups = sub.add_parser("groups", help="concurrency groups: limits shared by jobs (calls the API)")
    actions = groups.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=parser_class)
    actions.add_parser("list", help="every group: limit, slots held, runs waiting, jobs")
    actions.add_parser("get", help="one group: the runs holding its slots and those waiting").add_argument("name")
    put = actions.add_parser("set", help="create a group or set its limit (waiting runs start at once on a raise)")
    put.add_argument("name")
    put.add_argument("--limit", type=_limit, required=True, help="runs of its jobs at once, at most")
    actions.add_parser("delete", help="delete a group no job names").add_argument("name")
    for parser in actions.choices.values():
        parser.add_argument("--json", action="store_true", help="print the API's JSON (for scripts)")


def _list(groups: list[dict[str, Any]]) -> str:
    rows = [(g["name"], str(g["limit"]), str(g["holding"]), str(g["waiting"]), str(g["jobs"])) for g in groups]
    return table(("NAME", "LIMIT", "HOLDING", "WAITING", "JOBS"), rows)


def _show(group: dict[str, Any]) -> str:
    text = _list([group])
    holders = [
        (str(h["run_id"]), h["job_name"], when(h["scheduled_for"]), h["state"], h["node_id"] or "-")
        for h in group["holders"]
    ]
    text += "\n\nholding a slot:\n" + table(("RUN", "JOB", "SCHEDULED FOR", "STATE", "NODE"), holders)
    waiters = [(str(w["run_id"]), w["job_name"], when(w["scheduled_for"])) for w in group["waiters"]]
    text += "\n\nwaiting, in the order they get a slot:\n" + table(("RUN", "JOB", "SCHEDULED FOR"), waiters)
    return text


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    api = ApiClient(settings.api_url, settings.api_token, namespace=settings.namespace)
    path = f"/api/concurrency-groups/{args.name}" if args.action != "list" else "/api/concurrency-groups"
    if args.action == "list":
        answer: Any = api.call("GET", path)["items"]
        shown = _list(answer)
    elif args.action == "get":
        answer = api.call("GET", path)
        shown = _show(answer)
    elif args.action == "set":
        answer = api.call("PUT", path, {"limit": args.limit})
        shown = (
            f"Group {answer['name']}: limit {answer['limit']} ({answer['holding']} held, {answer['waiting']} waiting)."
        )
    else:
        api.call("DELETE", path)
        answer, shown = {"deleted": args.name}, f"Deleted group {args.name}."
    print(msgspec.json.format(msgspec.json.encode(answer), indent=2).decode() if args.json else shown)
    return 0
