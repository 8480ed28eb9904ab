"""`cronos jobs ...` and `cronos runs ...`: the REST API from the command line.

Every command is one or a few calls of cronos.client.api_client against CRONOS_API_URL with
CRONOS_API_TOKEN. People get an aligned table or `field  value` lines; `--json` prints the
API's JSON for scripts (a list command prints the array of every item). A failure is one
line on stderr (main prints the CronosError) and a non-zero exit.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from cronos import schedule_union
from cronos.client import (
    backfill_cli,
    breaker_cli,
    calendars_cli,
    labels_cli,
    logs_cli,
    runs_cli,
    trigger_cli,
    triggers_cli,
)
from cronos.client.api_client import ApiClient
from cronos.client.cancel_cli import add_command as add_cancel
from cronos.client.cancel_cli import cancel_run
from cronos.client.cli_output import table, when
from cronos.errors import CronosError, NotFound
from cronos.models import JOB_STATUSES, JOB_WRITABLE, Job
from cronos.settings import Settings

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

# Of a create; everything else has a default (and the API wants cron_expression, every or run_at).
_REQUIRED = ("name", "payload")


def _number(raw: str) -> float | int:
    try:
        number: Any = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        number = None
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number")
    return number


def _id_list(raw: str) -> list[int]:
    """`3,5` -> [3, 5]; `` (empty) -> [] (no parents)."""
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not all(p.isascii() and p.isdigit() and len(p) <= 19 for p in parts):
        raise argparse.ArgumentTypeError("must be job ids separated by commas")
    return [int(p) for p in parts]


def _schedules(raw: str) -> list[Any]:
    """`0 8 * * 1-5; every 90m` -> the API's `schedules`; `` -> [] (none)."""
    try:
        return [msgspec.to_builtins(entry) for entry in schedule_union.parse_text(raw)]
    except CronosError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# `--chain null`: clear an optional field; argparse's own None means "not given", so null needs its own mark.
_CLEARED = object()


def _object_or_null(raw: str) -> object:
    """An optional object field's value: a JSON object, or `null` to clear it."""
    return _CLEARED if raw.strip() == "null" else trigger_cli.json_object(raw)


def _field_options() -> dict[str, dict[str, Any]]:
    """argparse options per field a client sets, typed from the Job model (payload: a JSON object)."""
    info = msgspec.inspect.type_info(Job)
    assert isinstance(info, msgspec.inspect.StructType)
    options: dict[str, dict[str, Any]] = {}
    for field in info.fields:
        if field.name not in JOB_WRITABLE or field.name == "managed_by":
            continue
        kind = field.type
        optional = isinstance(kind, msgspec.inspect.UnionType)
        if isinstance(kind, msgspec.inspect.UnionType):  # an optional field: typed as its value
            kind = next(t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType))
        if optional and isinstance(kind, msgspec.inspect.StructType):  # expectations, hosts, chain
            help_ = f"the job's `{field.name}`: a JSON object, or null to clear it"
            options[field.name] = {"type": _object_or_null, "help": help_}
        elif field.name == "payload" or isinstance(kind, msgspec.inspect.StructType):
            options[field.name] = {"type": trigger_cli.json_object, "help": f"the job's `{field.name}`: a JSON object"}
        elif field.name == "calendars":
            help_ = "calendars it names: NAME (exclude its days) or NAME:allow (only its days), comma-separated"
            options[field.name] = {"type": calendars_cli.calendar_refs, "help": help_}
        elif field.name == "schedules":
            help_ = "more schedules, `;`-separated: CRON, TZ=ZONE CRON or every DURATION (docs/schedules.md)"
            options[field.name] = {"type": _schedules, "help": help_}
        elif field.name == "spread":
            help_ = "every tick moved by an offset the name picks in [0, SPREAD): 10m, 1h (docs/spread.md)"
            options[field.name] = {"type": str, "help": help_}
        elif isinstance(kind, msgspec.inspect.DictType):  # labels
            options[field.name] = {"type": labels_cli.labels, "help": "the job's labels: key=value, comma-separated"}
        elif isinstance(kind, msgspec.inspect.ListType):  # parents
            options[field.name] = {"type": _id_list, "help": f"the job's `{field.name}`: ids, comma-separated"}
        elif isinstance(kind, msgspec.inspect.LiteralType):
            options[field.name] = {"choices": kind.values, "help": f"the job's `{field.name}`"}
        else:
            numeric = isinstance(kind, msgspec.inspect.IntType | msgspec.inspect.FloatType)
            options[field.name] = {"type": _number if numeric else str, "help": f"the job's `{field.name}`"}
    return options


def _job_fields(parser: argparse.ArgumentParser, *, create: bool) -> None:
    for name, option in _field_options().items():
        required = create and name in _REQUIRED
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, required=required, **option)


def add_commands(sub: SubParsers, parser_class: type[argparse.ArgumentParser]) -> None:
    api = "calls the API at $CRONOS_API_URL with $CRONOS_API_TOKEN"
    jobs = sub.add_parser("jobs", help=f"list, read, create, change, pause, resume, trigger, delete jobs ({api})")
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=parser_class)
    listing = actions.add_parser("list", help="every job: id, name, schedule, status, next run")
    listing.add_argument("--status", choices=JOB_STATUSES)
    labels_cli.add_selector(listing)
    for action, text in (
        ("get", "one job, its next run and its last run"),
        ("delete", "delete a job and its runs"),
        ("pause", "pause a job"),
        ("resume", "resume a job (ticks due while paused are not caught up)"),
        ("trigger", "queue one run now, optionally with payload overrides or a past tick's date"),
    ):
        actions.add_parser(action, help=text).add_argument("job", help="id or name")
    trigger_cli.add_options(actions.choices["trigger"])
    calendars_cli.add_pause_options(actions.choices["pause"])
    backfill_cli.add_options(actions.add_parser("backfill", help="queue runs for past ticks (missing, failed, all)"))
    actions.choices["backfill"].add_argument("job", help="id or name")
    labels_cli.add_bulk(actions)
    triggers_cli.add_commands(actions)
    breaker_cli.add_commands(actions)
    _job_fields(actions.add_parser("create", help="register a job"), create=True)
    update = actions.add_parser("update", help="change the fields given")
    update.add_argument("job", help="id or name")
    _job_fields(update, create=False)

    runs = sub.add_parser("runs", help=f"list runs (every job or one), get one with its traceback, retry one ({api})")
    run_actions = runs.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=parser_class)
    runs_cli.add_list_options(run_actions.add_parser("list", help="runs of every job or one, newest first, filtered"))
    run_actions.add_parser("get", help="one run with its error, traceback and result").add_argument("run", type=int)
    add_cancel(run_actions)
    runs_cli.add_retry(run_actions)
    logs_cli.add_logs(run_actions)
    for parser in (*actions.choices.values(), *run_actions.choices.values()):
        parser.add_argument("--json", action="store_true", help="print the API's JSON (for scripts)")


def client(settings: Settings) -> ApiClient:
    return ApiClient(settings.api_url, settings.api_token, namespace=settings.namespace)


def job_id(api: ApiClient, ref: str) -> int:
    """A job's id from its id or its name."""
    if ref.isascii() and ref.isdigit():
        return int(ref)
    for job in api.pages("/api/jobs"):
        if job["name"] == ref:
            return int(job["id"])
    raise NotFound(f"no job named {ref!r}")


def _dump(value: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if name.endswith("_at") or name in ("scheduled_for", "last_scheduled_for"):
        return when(value)
    if isinstance(value, dict | list):
        return msgspec.json.encode(value).decode()
    if name.endswith("_ms") and isinstance(value, float):
        return f"{value:.1f}ms"  # a measured time: to a tenth of a millisecond, not the float's 17 digits
    return str(value)


def _fields(item: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    return table(("FIELD", "VALUE"), [(k, _cell(k, v)) for k, v in item.items() if k not in skip])


def _seconds(value_ms: float | None) -> str:
    return "-" if value_ms is None else f"{value_ms / 1000:.3f}s"


def _run_line(run: dict[str, Any]) -> tuple[str, ...]:
    why = run["error"] or run["skip_reason"] or ""
    return (
        str(run["id"]), when(run["scheduled_for"]), str(run["attempt"]), run["trigger"], run["state"],
        # The API's start delay (from the tick) and its two parts (cronos.delays), as the console shows them.
        _seconds(run.get("start_delay_ms")), _seconds(run.get("held_back_ms")), _seconds(run.get("waited_ms")),
        "-" if run["duration_ms"] is None else f"{run['duration_ms']:.0f}ms",
        run["node_id"] or "-", why.splitlines()[0][:60] if why else "",
    )  # fmt: skip


_DELAYS = ("START DELAY", "HELD BACK", "WAITED")  # the API's start_delay_ms, held_back_ms, waited_ms


def _runs_table(runs: list[dict[str, Any]]) -> str:
    header = ("ID", "SCHEDULED FOR", "ATTEMPT", "TRIGGER", "STATE", *_DELAYS, "DURATION", "NODE", "ERROR")
    return table(header, [_run_line(r) for r in runs])


def _jobs_table(jobs: list[dict[str, Any]]) -> str:
    header = ("ID", "NAME", "SCHEDULE", "TIMEZONE", "KIND", "STATUS", "NEXT RUN")
    shown = ("timezone", "kind", "status")
    rows = [(str(j["id"]), j["name"], _schedule(j), *(j[f] for f in shown), when(j["next_run_at"], "-")) for j in jobs]
    return table(header, rows)


def _schedule(job: dict[str, Any]) -> str:
    """A cron expression, `every 1h30m` (an interval) or `once` (a one-off), and its further schedules."""
    if job.get("every") is not None:
        own = f"every {job['every']}"
    else:
        own = str(job["cron_expression"]) if job.get("cron_expression") is not None else "once"
    if job.get("schedules"):
        own = f"{own}; {schedule_union.text_of(msgspec.convert(job['schedules'], list[schedule_union.ScheduleEntry]))}"
    return own if not job.get("spread") else f"{own} (spread {job['spread']})"


def _show_job(job: dict[str, Any]) -> str:
    text = _fields(job, skip=("last_run", "webhook_secret", "warnings"))
    if job.get("last_run"):
        text += "\n\nlast run:\n" + _runs_table([job["last_run"]])
    if job.get("webhook_secret"):
        text += f"\n\nwebhook signing secret (shown this once): {job['webhook_secret']}"
    return text


def _show_run(run: dict[str, Any]) -> str:
    text = _fields(run, skip=("traceback", "result", "usage"))
    if run.get("usage"):
        text += "\n\nusage:\n" + usage_lines(run["usage"])
    for name in ("traceback", "result"):
        if run.get(name):
            text += f"\n\n{name}:\n{run[name].rstrip()}"
    return text


def usage_lines(usage: dict[str, Any]) -> str:
    """A run's usage (the API's `usage`, docs/run-usage.md) as people read it."""
    lines = [f"wall    {_seconds(usage['wall_ms'])}"]
    if usage.get("cpu_ms") is not None:
        parts = ""
        if usage.get("cpu_user_ms") is not None and usage.get("cpu_sys_ms") is not None:
            parts = f" (user {_seconds(usage['cpu_user_ms'])}, system {_seconds(usage['cpu_sys_ms'])})"
        lines.append(f"cpu     {_seconds(usage['cpu_ms'])}{parts}")
    if usage.get("max_rss_bytes") is not None:
        lines.append(f"memory  {usage['max_rss_bytes'] / 1048576:.1f} MiB peak")
    return "\n".join(lines)


def _given(args: argparse.Namespace) -> dict[str, Any]:
    given = {name: value for name in _field_options() if (value := getattr(args, name, None)) is not None}
    return {name: None if value is _CLEARED else value for name, value in given.items()}


def _jobs(api: ApiClient, args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    """The API's answer to a `jobs` action and how to show it to people."""
    if args.action == "list":
        return list(api.pages("/api/jobs", {"status": args.status, "selector": args.selector})), _jobs_table
    if args.action == "bulk":
        bulk = {"selector": args.selector, "action": args.verb}
        return api.call("POST", "/api/jobs/bulk", bulk), labels_cli.shown_bulk
    if args.action == "create":
        return api.call("POST", "/api/jobs", _given(args)), _show_job
    path = f"/api/jobs/{job_id(api, args.job)}"
    if args.action == "get":
        return api.call("GET", path), _show_job
    if args.action == "triggers":
        return triggers_cli.run(api, args, path)
    if args.action == "breaker":
        return breaker_cli.run(api, args, path)
    if args.action == "update":
        if not (changes := _given(args)):
            raise CronosError("jobs update: nothing to change; give at least one --FIELD")
        return api.call("PATCH", path, changes), _show_job
    if args.action == "delete":
        api.call("DELETE", path)
        return {"deleted": args.job}, lambda _: f"Deleted job {args.job}."
    if args.action == "trigger":
        return api.call("POST", f"{path}/trigger", trigger_cli.body(args)), trigger_cli.shown
    if args.action == "backfill":
        return api.call("POST", f"{path}/backfill", backfill_cli.body(args)), backfill_cli.shown
    body = calendars_cli.pause_body(args) if args.action == "pause" else None
    job = api.call("POST", f"{path}/{args.action}", body)  # pause (timed: until, note), resume
    return (
        job,
        lambda j: (
            f"Job {j['id']} {j['name']!r} is {j['status']}"
            + (f" until {when(j['paused_until'])}." if j.get("paused_until") else ".")
        ),
    )


def _runs(api: ApiClient, args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    if args.action == "get":
        return api.call("GET", f"/api/runs/{args.run}"), _show_run
    if args.action == "cancel":
        return cancel_run(api, args)
    if args.action == "retry":
        return runs_cli.retry_run(api, args)
    return runs_cli.list_runs(api, args, job_id), _runs_table


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    api = client(settings)
    if args.command == "runs" and args.action == "logs":  # its lines are printed as they come
        logs_cli.logs(api, args)
        return 0
    commands = {"jobs": _jobs, "runs": _runs, "calendars": calendars_cli.run, "blackouts": calendars_cli.run}
    answer, show = commands[args.command](api, args)
    print(_dump(answer) if args.json else show(answer))
    for warning in answer.get("warnings", []) if isinstance(answer, dict) else []:
        print(
            f"cronos: warning: {warning['message']}", file=sys.stderr
        )  # stored all the same (e.g. no executor serves it)
    return 0
