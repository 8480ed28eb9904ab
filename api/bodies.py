"""Decoding requests and encoding responses: the API's boundary with msgspec.

Validation happens here, before any store call: the body's shape (msgspec), then the
schedule (cronos.schedule) and the payload against its kind (cronos.models).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import msgspec
from aiohttp import web

from api.errors import MalformedBody, invalid_input
from api.schemas import WHEN_FIELDS, JobOut, RunOut
from cronos import chains, delays, instants, selectors, spread
from cronos.errors import InvalidInput, InvalidSchedule, NotFound
from cronos.hashed import hashed
from cronos.interval import canonical
from cronos.models import Job, Run, RunSummary
from cronos.netguard import literal_host_refusal
from cronos.payloads import PAYLOAD_TYPES, check_payload
from cronos.redact import redact_payload
from cronos.schedule import Schedule, parse_schedule, upcoming
from cronos.schedule_union import check_entries
from cronos.schedule_window import job_schedule, schedule_of, window_over

T = TypeVar("T")

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
# A page of jobs ends once its payloads reach this much JSON (it holds at least one job): 500
# payloads at the 64 KiB bound would be a 32 MB response and ~200 MB of API memory.
PAGE_PAYLOAD_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 32  # nesting of arrays and objects inside a payload
MAX_ID = 2**63 - 1  # ids are bigint
# How long a client may take to send its body once its headers are in. aiohttp bounds neither
# this nor the time to send the headers; a reverse proxy in front bounds both (see README).
BODY_READ_S = 30.0

_encoder = msgspec.json.Encoder()


async def decode(request: web.Request, cls: type[T]) -> T:
    """The body as `cls`: 400 when it is not JSON, 422 naming the field when it does not fit,
    408 when it does not arrive within BODY_READ_S (its media type is checked by the middleware)."""
    try:
        async with asyncio.timeout(BODY_READ_S):
            raw = await request.read()  # aiohttp raises 413 past the app's client_max_size
    except TimeoutError:
        raise web.HTTPRequestTimeout(text=f"the request body did not arrive within {BODY_READ_S:g} s") from None
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise MalformedBody(f"body is not valid JSON: {exc}") from exc
    except RecursionError:  # msgspec decodes nested values recursively: far past MAX_DEPTH
        raise InvalidInput(_deep_field(raw), f"nested deeper than {MAX_DEPTH} levels") from None
    try:
        body = convert(value, cls)
    except msgspec.ValidationError as exc:
        raise invalid_input(exc) from exc
    _check_instants(body, "$")
    return body


def check_instant(value: datetime, field: str) -> datetime:
    """A query's bound the API can compute with: years 1-9999 in UTC, else a 422 naming `field`.
    msgspec and fromisoformat accept `9999-12-31T23:59:59-14:00`, which has no UTC datetime.
    An instant a body holds is held to the stored range instead (cronos.instants)."""
    try:
        value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidInput(field, "must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z") from None
    return value


def _check_instants(value: Any, path: str) -> None:
    """Every datetime of a decoded body (its fields, nested Structs, lists) is one PostgreSQL
    stores and gives back exactly (cronos.instants), else a 422 naming it: one check for all."""
    if isinstance(value, datetime):
        instants.check(value, path)
    elif isinstance(value, msgspec.Struct):  # named as the body spells them (`from`, not `from_`)
        for name, spelt in zip(value.__struct_fields__, value.__struct_encode_fields__, strict=True):
            _check_instants(getattr(value, name), f"{path}.{spelt}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_instants(item, f"{path}[{index}]")


_FLOAT_FOR_INT = re.compile(r"Expected `[^`]*\bint\b[^`]*`, got `float` - at `\$(?P<path>[^`]*)`")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _integral_to_int(value: Any, path: str) -> bool:
    """Replace the float at `path` (`.a[0].b`) by its int when it is integral; False otherwise."""
    steps = [(name, int(index) if index else 0) for name, index in _STEP.findall(path)]
    if not steps or "".join(f".{n}" if n else f"[{i}]" for n, i in steps) != path:
        return False
    parent = value
    for name, index in steps[:-1]:
        parent = parent[name] if name else parent[index]
    name, index = steps[-1]
    key: Any = name if name else index
    number = parent[key]
    if not (isinstance(number, float) and number.is_integer() and abs(number) < 2**63):
        return False
    parent[key] = int(number)
    return True


def convert(value: Any, cls: type[T]) -> T:
    """msgspec.convert, except that an integral float (`3.0`) is an integer, as in JSON Schema:
    the OpenAPI document's `integer` admits it, so the API does too."""
    for _ in range(32):
        try:
            return msgspec.convert(value, cls)
        except msgspec.ValidationError as exc:
            match = _FLOAT_FOR_INT.fullmatch(str(exc))
            if match is None or not _integral_to_int(value, match["path"]):
                raise
    return msgspec.convert(value, cls)


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _deep_field(raw: bytes) -> str:
    """The top-level member of a JSON body where nesting passes MAX_DEPTH (only on refusal)."""
    depth, last, member = 0, b"", b""
    for match in _TOKEN.finditer(raw):
        token = match[0]
        if token[0] == ord('"'):
            if depth == 1:
                last = token  # a member name (or a value, then replaced by the next name)
        elif token in (b"[", b"{"):
            depth += 1
            if depth == 2:
                member = last
            if depth > MAX_DEPTH:
                break
        else:
            depth -= 1
    name = member[1:-1].decode(errors="replace")
    return f"$.{name}" if name.isidentifier() else "$"


def _depth_field(value: Any, path: str) -> str | None:
    """The path where `value` nests deeper than MAX_DEPTH, or None; iterative, so any depth is safe."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return where
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(child, dict | list):
                    step = f"{where}.{key}" if isinstance(item, dict) else f"{where}[{key}]"
                    stack.append((child, step, depth + 1))
    return None


def _no_nul(value: Any, path: str) -> None:
    """PostgreSQL text and jsonb cannot hold U+0000: refuse it here, naming where it is."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidInput(path, "must not contain NUL (\\u0000) characters")
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key, path)
            _no_nul(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_nul(item, f"{path}[{index}]")


@dataclass(frozen=True, slots=True)
class JobPolicy:
    """What the cluster and the caller allow a job to be (built per request)."""

    allow_nets: tuple[str, ...]  # settings.http_allow_nets
    allow_shell: bool  # settings.allow_shell AND the caller holds scope admin
    payload_max_bytes: int  # settings.job_payload_max_bytes


SHELL_REFUSED = (
    "shell jobs need the cluster to allow them (CRONOS_ALLOW_SHELL=1, read by the API too) and a token with scope admin"
)


def check_schedule(expression: str, timezone: str, name: str = "") -> Schedule:
    """The schedule of a job named `name` (or of a preview), refused as job creation refuses it: 422
    naming the field. An `H` takes the values the name picks (cronos.hashed)."""
    _no_nul(expression, "$.cron_expression")
    _no_nul(timezone, "$.timezone")
    return parse_schedule(hashed(expression, name), timezone)  # InvalidSchedule names its field


def _check_when(fields: dict[str, Any]) -> None:
    """A cron expression, an interval (`every`, spelled canonically here) or a one-off's run_at
    (exactly one), and for a repeating job more schedules (cronos.schedule_union). A window clamps
    whatever it holds: an empty one (end_at before start_at, a run_at outside it) has nothing to
    run, and the job ends."""
    given = [name for name in WHEN_FIELDS if fields.get(name) is not None]
    if len(given) != 1:
        field = "every" if "every" in given else "cron_expression"  # the seed's field unless an interval's
        raise InvalidInput(
            f"$.{field}", "give exactly one of cron_expression, every (an interval) and run_at (a one-off)"
        )
    if fields.get("anchor") is not None and fields.get("every") is None:
        raise InvalidInput("$.anchor", "only an interval (every) has an anchor")
    if fields.get("every") is not None:
        fields["every"] = canonical(fields["every"])
    if fields["cron_expression"] is not None:
        check_schedule(fields["cron_expression"], fields["timezone"], fields["name"])
    else:
        _no_nul(fields["timezone"], "$.timezone")
        parse_schedule("* * * * *", fields["timezone"])  # the zone is still checked (InvalidSchedule names it)
    if entries := fields.get("schedules"):
        if fields.get("run_at") is not None:
            raise InvalidInput("$.schedules", "a one-off (run_at) has no other schedules")
        fields["schedules"] = check_entries(entries, fields["timezone"], fields["name"], parse_schedule)
    if fields.get("spread") is not None:
        fields["spread"] = _checked_spread(fields)


def _checked_spread(fields: dict[str, Any]) -> str | None:
    """The job's spread as stored, refused (422 naming $.spread) for a one-off and when it is not
    shorter than the schedule's shortest gap between two ticks (cronos.spread.check)."""
    base = None
    if fields.get("run_at") is None:
        base = job_schedule(
            fields["cron_expression"], fields["timezone"], every=fields.get("every"), anchor=fields.get("anchor"),
            key=fields["name"], schedules=fields.get("schedules") or (),
        )[0]  # fmt: skip
    return spread.check(fields["spread"], base, utc_now())


def check_job(fields: dict[str, Any], policy: JobPolicy) -> None:
    """Validate the parts of a job msgspec cannot: its schedule, its payload for its kind, the policy."""
    if fields["kind"] == "shell" and not policy.allow_shell:
        raise InvalidInput("$.kind", SHELL_REFUSED)
    _payload_bounds(fields["payload"], policy)
    for name in ("name", "payload"):
        _no_nul(fields[name], f"$.{name}")
    _check_when(fields)
    _payload_shape(fields["kind"], fields["payload"], policy)
    selectors.check_labels(fields.get("labels") or {})
    chains.check(fields.get("parents") or [], fields.get("chain"))
    _check_hosts(fields)


# Per-host runs are judged apart per host by the unique key (G1), retries (each on its host) and
# misfires (each tick's runs); overlap is judged per job (G3: one exclusive run of a job running),
# where one host's run would make another's skip, so a per-host job allows overlap
# (docs/every-host.md says why).
HOSTS_NEED_ALLOW = "a per-host job (hosts) needs concurrency_policy 'allow': overlap is not judged per host yet"


def _check_hosts(fields: dict[str, Any]) -> None:
    if fields.get("hosts") is None:
        return
    _no_nul(fields["hosts"].label, "$.hosts.label")
    if fields["concurrency_policy"] != "allow":
        raise InvalidInput("$.hosts", HOSTS_NEED_ALLOW)


def check_job_payload(kind: str, payload: dict[str, Any], policy: JobPolicy) -> None:
    """A payload as a job of `kind` must have it (a run's payload with its inputs too): as check_job
    checks it, the SSRF guard's check of an http job's address-literal URL included."""
    _payload_bounds(payload, policy)
    _no_nul(payload, "$.payload")
    _payload_shape(kind, payload, policy)


def _payload_bounds(payload: dict[str, Any], policy: JobPolicy) -> None:
    if (deep := _depth_field(payload, "$.payload")) is not None:
        raise InvalidInput(deep, f"nested deeper than {MAX_DEPTH} levels")
    size = len(_encoder.encode(payload))
    if size > policy.payload_max_bytes:
        raise InvalidInput(
            "$.payload", f"{size} bytes of JSON, more than {policy.payload_max_bytes} (CRONOS_JOB_PAYLOAD_MAX_BYTES)"
        )


def _payload_shape(kind: str, payload: dict[str, Any], policy: JobPolicy) -> None:
    try:
        check_payload(kind, convert(payload, PAYLOAD_TYPES[kind]))
    except msgspec.ValidationError as exc:
        raise invalid_input(exc, base="$.payload") from exc
    if kind == "http" and (why := literal_host_refusal(payload["url"], policy.allow_nets)) is not None:
        raise InvalidInput("$.payload.url", why)  # names are checked again, resolved, at run time


def created_past_window(fields: dict[str, Any], now: datetime) -> bool:
    """A job created now would have no tick left: its window is over, or a one-off's run_at passed
    late beyond its misfire grace (lifecycle.late_beyond_grace)."""
    schedule, _notice = job_schedule(
        fields["cron_expression"],
        fields["timezone"],
        run_at=fields.get("run_at"),
        start_at=fields.get("start_at"),
        end_at=fields.get("end_at"),
        every=fields.get("every"),
        anchor=fields.get("anchor"),
        key=fields["name"],
        schedules=fields.get("schedules") or (),
        spread=fields.get("spread"),
    )
    return window_over(schedule, now, now, fields.get("max_runs"), grace_s=fields["misfire_grace_s"])


def respond(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_encoder.encode(body), status=status, content_type="application/json")


def utc_now() -> datetime:
    return datetime.now(UTC)


def job_out(job: Job, now: datetime, **extra: Any) -> JobOut:
    """The job as the API shows it; `next_run_at` is null while paused."""
    try:  # a stored row the parser now refuses runs on its previous meaning, flagged
        schedule, notice = schedule_of(job)
    except InvalidSchedule as exc:  # never valid: the dispatcher does not run it either
        schedule, notice = None, f"{exc.field}: {exc.message}. The job is not dispatched until its schedule is edited"
    next_run = None
    if job.status == "active" and schedule is not None:
        next_run = upcoming(schedule.next_after, min(now, job.last_scheduled_for or now))  # a one-off just past due
    fields = msgspec.structs.asdict(job)
    fields["payload"] = redact_payload(job.kind, job.payload)  # secrets are write-only
    return JobOut(next_run_at=next_run, schedule_notice=notice, **fields, **extra)


def run_out(run: Run, *, detail: bool = False) -> RunOut:
    """The run as the API shows it; its traceback and result only in `detail` (they can be long)."""
    fields: dict[str, Any] = {name: getattr(run, name) for name in RunSummary.__struct_fields__}
    fields.update(
        start_delay_ms=delays.ms(delays.start_delay_s(run.scheduled_for, run.started_at)),
        held_back_ms=delays.ms(delays.held_back_s(run.scheduled_for, run.due_at)),
        waited_ms=delays.ms(delays.waited_s(run.due_at, run.started_at)),
    )
    if detail:
        return RunOut(**fields, traceback=run.traceback, result=run.result)
    return RunOut(**fields)


# --- pagination: `limit` and an opaque cursor (the last id of the previous page) --------


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    return _id_cursor(_cursor_bytes(raw))


# A run listing's cursor also carries the last run's tick, to the microsecond (the listing is
# ordered by scheduled_for, then id): b"t", then the tick in microseconds since the epoch and the
# id, 8 bytes each (23 characters, within the documented 40). An "id:" cursor (before 0018) is
# still taken: the store finds its run's tick; the tick is None for those.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_RUN_CURSOR = b"t"


def encode_run_cursor(scheduled_for: datetime, last_id: int) -> str:
    micros = (scheduled_for - _EPOCH) // _MICROSECOND
    packed = _RUN_CURSOR + micros.to_bytes(8, "big", signed=True) + last_id.to_bytes(8, "big")
    return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def decode_run_cursor(raw: str | None) -> tuple[datetime | None, int] | None:
    if raw is None or raw == "":
        return None
    data = _cursor_bytes(raw)
    if not (len(data) == 17 and data.startswith(_RUN_CURSOR)):
        return None, _id_cursor(data)
    micros, last_id = int.from_bytes(data[1:9], "big", signed=True), int.from_bytes(data[9:], "big")
    try:
        if last_id > MAX_ID:
            raise OverflowError(last_id)
        return _EPOCH + micros * _MICROSECOND, last_id
    except OverflowError:  # past datetime's years
        raise _bad_cursor() from None


def _bad_cursor() -> InvalidInput:
    return InvalidInput("cursor", "not a cursor returned by this API")


def _cursor_bytes(raw: str) -> bytes:
    try:
        if len(raw) > 40:  # ours are at most 31 characters
            raise ValueError(raw)
        return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except (binascii.Error, ValueError):
        raise _bad_cursor() from None


def _id_cursor(data: bytes) -> int:
    try:
        prefix, _, number = data.decode().partition(":")
        # Length first: int() refuses more than 4,300 digits, and a bigint has at most 19.
        if prefix != "id" or not (len(number) <= 19 and number.isascii() and number.isdigit()):
            raise ValueError(data)
        if int(number) > MAX_ID:
            raise ValueError(data)
        return int(number)
    except (UnicodeDecodeError, ValueError):
        raise _bad_cursor() from None


def query_limit(request: web.Request, default: int = DEFAULT_LIMIT) -> int:
    raw = request.query.get("limit")
    if raw is None:
        return default
    if not (len(raw) <= 3 and raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIMIT:
        raise InvalidInput("limit", f"must be an integer between 1 and {MAX_LIMIT}")
    return int(raw)


def query_choice(request: web.Request, name: str, allowed: tuple[str, ...]) -> str | None:
    raw = request.query.get(name)
    if raw is not None and raw not in allowed:
        raise InvalidInput(name, f"must be one of {', '.join(allowed)}")
    return raw


def path_id(request: web.Request, name: str = "id") -> int:
    """The route only matches digits; past a bigint no row can have it: 404 without int()
    (which refuses more than 4,300 digits)."""
    digits = request.match_info[name].lstrip("0") or "0"
    if len(digits) > 19 or int(digits) > MAX_ID:
        raise NotFound(f"no such resource: {request.path[:100]}")
    return int(digits)
