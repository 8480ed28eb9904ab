"""Labels on the command line: `--labels team=data,env=prod` on create/update, `cronos jobs list -l SELECTOR`,
and `cronos jobs bulk pause|resume|trigger -l SELECTOR` (POST /api/jobs/bulk)."""

from __future__ import annotations

import argparse
from typing import Any

from cronos.client.cli_output import counted, table

SELECTOR_HELP = "a label selector: requirements that all hold, e.g. team=data,env!=prod,tier in (a,b),key,!key"


def labels(raw: str) -> dict[str, str]:
    """`team=data,env=prod` -> {"team": "data", "env": "prod"}; an empty text clears the labels."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise argparse.ArgumentTypeError(f"{part!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def add_selector(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument("-l", "--selector", required=required, metavar="SELECTOR", help=SELECTOR_HELP)


def add_bulk(actions: Any) -> None:
    bulk = actions.add_parser("bulk", help="pause, resume or trigger every job a label selector selects")
    bulk.add_argument("verb", choices=("pause", "resume", "trigger"))
    add_selector(bulk, required=True)


def shown_bulk(answer: dict[str, Any]) -> str:
    rows = [
        (str(i["job_id"]), i["name"], "changed", i["status"], str(i.get("run_id") or "")) for i in answer["changed"]
    ]
    rows += [
        (str(i["job_id"]), i["name"], "unchanged", i["status"], i.get("reason") or "") for i in answer["unchanged"]
    ]
    head = table(("ID", "NAME", "RESULT", "STATUS", "RUN / WHY"), rows) + "\n" if rows else ""
    return head + f"{answer['action']}: {counted(answer['matched'], 'job')} matched, {len(answer['changed'])} changed"
