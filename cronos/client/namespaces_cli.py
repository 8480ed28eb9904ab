"""`cronos namespaces list|create|delete`: the namespaces jobs live in, over the API (/api/namespaces).

cronos namespaces create data       # a cluster admin's token (scope admin)
cronos --namespace data jobs list   # or CRONOS_NAMESPACE=data: every client command acts there
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


def add_commands(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    spaces = sub.add_parser("namespaces", help="namespaces: where jobs live, one per team (calls the API)")
    actions = spaces.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=parser_class)
    actions.add_parser("list", help="every namespace")
    actions.add_parser("create", help="create a namespace (a cluster admin)").add_argument("name")
    actions.add_parser("delete", help="delete a namespace that holds no job").add_argument("name")
    for parser in actions.choices.values():
        parser.add_argument("--json", action="store_true", help="print the API's JSON (for scripts)")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    api = ApiClient(settings.api_url, settings.api_token)  # the path names the namespace
    answer: Any
    if args.action == "list":
        answer = api.call("GET", "/api/namespaces")["items"]
        shown = table(("NAME", "CREATED"), [(n["name"], when(n["created_at"])) for n in answer])
    elif args.action == "create":
        answer = api.call("PUT", f"/api/namespaces/{args.name}")
        shown = f"Namespace {answer['name']} (created {when(answer['created_at'])})."
    else:
        api.call("DELETE", f"/api/namespaces/{args.name}")
        answer, shown = {"deleted": args.name}, f"Deleted namespace {args.name}."
    print(msgspec.json.format(msgspec.json.encode(answer), indent=2).decode() if args.json else shown)
    return 0
