"""`cronos apply -f FILE|DIR [--dry-run] [--prune]`: the I/O around cronos.client.apply.

Reads the files (a folder: its *.yaml, *.yml and *.json, by name), fetches the jobs-file
schema and the current jobs from the API, prints the plan one line per job, and (without
--dry-run) carries it out in that order, deletions last. Nothing is written before every
file validated; a refusal by the API stops the apply with one line naming the file, the job
and the field (what came before it stays done: applying again finishes the job). A dry run
sends each call with `?dry_run=true`, which the API checks as it would the write, writing nothing,
so the plan shows every refusal the apply would meet, and the dry run then exits non-zero.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cronos import selectors
from cronos.client.api_client import ApiClient, ApiError
from cronos.client.apply import Action, Step, describe, plan, scoped, strays, summary
from cronos.client.apply_groups import CALENDARS, GROUPS, apply_named, desired_named
from cronos.client.apply_lint import schedule_notes
from cronos.client.jobs_cli import client
from cronos.client.jobs_file import ApplyInvalid, desired_jobs, file_namespace, parse
from cronos.settings import Settings

if TYPE_CHECKING:
    from cronos.client.jobs_cli import SubParsers

SCHEMA_PATH = "/api/jobs-file.schema.json"
_SUFFIXES = (".yaml", ".yml", ".json")


def add_command(sub: SubParsers) -> None:
    apply = sub.add_parser(
        "apply",
        help="make the cluster's jobs match jobs files (YAML, a top-level `jobs:` list): "
        f"create, update, pause/resume; calls $CRONOS_API_URL (schema: GET {SCHEMA_PATH})",
    )
    apply.add_argument(
        "-f", "--file", dest="files", action="append", required=True, metavar="FILE|DIR",
        help="a jobs file, or a folder of them (repeatable)",
    )  # fmt: skip
    apply.add_argument(
        "--dry-run", action="store_true", help="print the plan and what the API would refuse; change nothing"
    )
    apply.add_argument("--prune", action="store_true", help="delete jobs apply created that no file names any more")
    apply.add_argument(
        "-l", "--selector", metavar="SELECTOR",
        help="only the jobs whose labels match this selector, in the files and in the cluster (--prune too)",
    )  # fmt: skip


def read_sources(paths: list[str]) -> list[tuple[str, str]]:
    """(file, text) of every jobs file named or in a folder named."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file())
            if not found:
                raise ApplyInvalid(f"{raw}: no {', '.join(_SUFFIXES)} file in this folder")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise ApplyInvalid(f"{raw}: no such file or folder")
    try:
        return [(str(f), f.read_text(encoding="utf-8")) for f in files]
    except (OSError, UnicodeDecodeError) as exc:
        raise ApplyInvalid(f"cannot read a jobs file: {exc}") from None


def _checked(body: Mapping[str, Any], declared: Mapping[str, set[str]]) -> dict[str, Any]:
    """A dry run's body without the groups and calendars the files declare: apply creates those
    first, so the API's dry run would not find them yet."""
    shown = dict(body)
    if shown.get("concurrency_group") in declared[GROUPS.key]:
        shown.pop("concurrency_group")
    if any(c.get("name") in declared[CALENDARS.key] for c in shown.get("calendars") or ()):
        shown.pop("calendars")
    return shown


def _dry_run(api: ApiClient, action: Action, declared: Mapping[str, set[str]]) -> str | None:
    """The API's checks of the action's call, nothing written (ApiError: its refusal); nothing to
    print after it."""
    path, dry = f"/api/jobs/{action.job_id}", {"dry_run": "true"}
    if action.step in (Step.CREATE, Step.UPDATE) and action.body is not None:
        create = action.step is Step.CREATE
        api.call("POST" if create else "PATCH", "/api/jobs" if create else path, _checked(action.body, declared), dry)
    elif action.step in (Step.PAUSE, Step.RESUME):
        api.call("POST", f"{path}/{action.step.value}", query=dry)
    elif action.step is Step.DELETE:
        api.call("DELETE", path, query=dry)
    return None


def _carry_out(api: ApiClient, action: Action) -> str | None:
    """Make the API call of one action; a line to print after it, if any."""
    path = f"/api/jobs/{action.job_id}"
    if action.step in (Step.CREATE, Step.UPDATE):
        create = action.step is Step.CREATE
        job = api.call("POST", "/api/jobs", action.body) if create else api.call("PATCH", path, action.body)
        # The schedule's warnings are in the plan already (apply_lint); the others are said here.
        told = [w for w in job.get("warnings", []) if w["code"] == "unserved_action"]
        lines = [f"           warning of {action.name!r}: {w['message']}" for w in told]
        if job.get("webhook_secret"):
            lines.append(
                f"           webhook signing secret of {action.name!r} (shown this once): {job['webhook_secret']}"
            )
        return "\n".join(lines) or None
    if action.step in (Step.PAUSE, Step.RESUME):
        api.call("POST", f"{path}/{action.step.value}")
    elif action.step is Step.DELETE:
        api.call("DELETE", path)
    return None


def run_apply(args: argparse.Namespace, settings: Settings) -> int:
    documents = [(source, parse(source, text)) for source, text in read_sources(args.files)]
    settings = msgspec.structs.replace(settings, namespace=file_namespace(documents, settings.namespace))
    api = client(settings)
    desired = desired_jobs(documents, api.call("GET", SCHEMA_PATH), os.environ)
    current: list[Mapping[str, Any]] = list(api.pages("/api/jobs"))
    if args.selector is not None:
        desired, current = scoped(selectors.parse(args.selector), desired, current)
    for line in apply_named(api, documents, dry_run=args.dry_run):  # before the jobs that name them
        print(line)
    actions = plan(desired, current, prune=args.prune, salt=os.urandom(16))
    by_name = {job["name"]: job for job in current}
    declared = {kind.key: set(desired_named(kind, documents)) for kind in (GROUPS, CALENDARS)}
    refused = 0
    for action in actions:
        extra = refusal = None
        try:
            extra = _dry_run(api, action, declared) if args.dry_run else _carry_out(api, action)
        except ApiError as exc:
            where = f"{action.source}: " if action.source else ""
            if not args.dry_run:
                raise ApplyInvalid(f"{where}job {action.name!r}: {action.step.value} refused: {exc}") from None
            refused += 1
            refusal = f"           would be refused: {exc}"
        print(describe(action))
        if refusal:
            print(refusal)
        for line in schedule_notes(api, action, by_name.get(action.name)):  # warnings, the ticks diff
            print(line)
        if extra:
            print(extra)
    if not args.prune:
        for job in strays(desired, current):
            print(f"{'kept':<9}  {job['name']}: not in the file(s); --prune deletes it")
    done = summary(actions)
    if not done.startswith("Nothing"):
        done = f"Plan (dry run, nothing changed): {done}." if args.dry_run else f"Applied: {done}."
    print(done)
    if refused:
        raise ApplyInvalid(f"dry run: {refused} change(s) of the plan would be refused (listed above)")
    return 0
