"""`cronos runs logs RUN [-f]`: a run's output (GET /api/runs/{id}/output), and with `-f` its
lines as they come until the run ends (GET /api/runs/{id}/output/follow, resumed from the last
line had when the stream breaks). Lines of stderr go to stderr, the others to stdout; `--json`
prints each line as the API's JSON object, one a line.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import msgspec

from cronos.client.api_client import PAGE, ApiClient, ApiUnreachable

RESUMES = 5  # a follow whose stream broke this many times in a row gives up (the error shown)
RESUME_WAIT_S = 1.0


def add_logs(actions: Any) -> None:
    logs: argparse.ArgumentParser = actions.add_parser("logs", help="a run's output; -f follows it until it ends")
    logs.add_argument("run", type=int)
    logs.add_argument("-f", "--follow", action="store_true", help="print lines as they come until the run ends")
    logs.add_argument("--offset", type=int, default=0, help="from this line number on (default 0: the first)")


def _print(line: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(msgspec.json.encode(line).decode(), flush=True)
    else:
        print(line["line"], file=sys.stderr if line["stream"] == "stderr" else sys.stdout, flush=True)


def logs(api: ApiClient, args: argparse.Namespace) -> dict[str, Any]:
    """Print the run's lines from --offset (following with -f); what became of it: state, next_offset."""
    path, offset = f"/api/runs/{args.run}/output", args.offset
    if not args.follow:
        while True:
            page = api.call("GET", path, query={"offset": offset, "limit": PAGE})
            for line in page["lines"]:
                _print(line, args.json)
            offset = page["next_offset"]
            if len(page["lines"]) < PAGE:
                return {"run_id": args.run, "state": page["state"], "next_offset": offset}
    broken = 0
    while True:
        try:
            for event in api.events(f"{path}/follow", query={"offset": offset}):
                data = msgspec.json.decode(event.data)
                if event.name == "end":
                    return {"run_id": args.run, **data}
                _print(data, args.json)
                offset, broken = data["seq"] + 1, 0
        except ApiUnreachable:
            broken += 1
            if broken >= RESUMES:
                raise
        else:
            broken += 1  # the stream ended without its end event: resume
        time.sleep(RESUME_WAIT_S)
