"""The one frozen Settings object: the only reader of the environment and `.env`.

Every value is decoded at start, so a bad one fails at once with its variable's name.
Durations carry their unit in the name.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from dotenv import dotenv_values

from cronos import namespaces, traces
from cronos.breaker import QueueDefaults, parse_defaults
from cronos.errors import ConfigError, InvalidInput
from cronos.host_limits import DEFAULT_HOST_LIMIT, HostLimit, parse_host_limits
from cronos.models import DEFAULT_QUEUE, parse_queues
from cronos.runtime import EVENT_LOOPS
from cronos.secret_strength import token_refusal
from cronos.selectors import key_refusal, prometheus_label
from cronos.signin_grants import GroupGrants, parse_group_grants

N = TypeVar("N", int, float)

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_LOG_FORMATS = ("auto", "json", "text")


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    port: int = 3002
    database_url: str = "postgresql://postgres@127.0.0.1:5432/cronos"
    redis_url: str = "redis://127.0.0.1:6379/0"
    node_id: str = ""
    key_prefix: str = "cronos:"
    log_level: str = "INFO"
    log_format: str = "auto"
    event_loop: str = "uvloop"  # the roles' event loop (cronos.runtime)
    # dispatcher
    leader_ttl_ms: int = 5000
    leader_db_timeout_ms: int = 2000  # a leader without a PostgreSQL round trip this long steps down
    resync_interval_s: float = 30.0
    stream_maxlen: int = 100_000
    push_lead_ms: int = 250  # tokens go out this long before they are due (executors wait, then claim)
    overdue_after_ms: int = 3000  # the watchdog re-pushes a pushed run still queued this long past due (0: off)
    consumer_idle_remove_s: float = 300.0  # the leader removes stream consumers of executors gone this long (0: off)
    catchup_max_per_s: float = 2000.0  # late runs of a catch-up are spread out at this rate
    # backfills (docs/backfill.md): runs one may queue, its fastest pace, how many release at once
    backfill_max_runs: int = 1000
    backfill_max_per_s: float = 20.0
    backfill_max_active_per_job: int = 1
    backfill_max_active_per_token: int = 3
    audit_interval_s: float = 60.0  # the reconciliation auditor checks one window this long
    audit_settle_s: float = 30.0  # ... ending this long ago (settled: written, caught up)
    runs_retention_s: float = 30 * 86_400  # runs older than this go, a whole day at a time; 0: keep all
    health_interval_s: float = 5.0  # the leader's health evaluator judges what happened this often
    breaker_default_failures: int = 0  # a job failing this many runs in a row pauses itself (0: never)
    breaker_defaults: QueueDefaults = ()  # per queue: (queue, Breaker) for jobs without their own (cronos.breaker)
    job_metrics_max: int = 1000  # per-job series the leader exports at most (0: none)
    job_metrics_jobs: tuple[str, ...] = ()  # ... of the jobs with these names (`*` globs; empty: any)
    metric_label_keys: tuple[str, ...] = ()  # job label keys carried to those series as label_<key>
    # executor
    executor_concurrency: int = 2000  # runs claimed and executing at once (coroutines: see README)
    executor_prefetch: int = 4000  # tokens in hand at once: held for their due time, executing, recording
    executor_queues: tuple[str, ...] = (DEFAULT_QUEUE,)  # the queues (streams) an executor serves
    run_lease_s: float = 10.0
    drain_timeout_s: float = 30.0
    cancel_grace_s: float = 10.0  # a cancelled run's work is told to stop, then cancelled this much later
    allow_shell: bool = False
    executor_labels: str = ""  # `k=v,k2=v2`: per-host jobs may run only on executors with a label
    shell_user: str = ""  # shell jobs run as this user (the executor must be root); empty: the executor's
    result_max_bytes: int = 4096
    # true: executors reserve a run when its token arrives ahead of due (the push lead) and at its
    # due instant only start it (docs/lifecycle.md). Off by default until it is measured faster: the
    # reservation and the start are two statements where the claim is one.
    reserve_ahead: bool = False
    output_max_lines: int = 2000  # a run's stored output: its first and last halves kept (0: none kept)
    output_max_bytes: int = 1_048_576  # ... and at most this much of it
    # observability
    metrics_port: int = 0
    # traces of runs: "otlp" when OTEL_* settings turn them on (cronos.traces.exporter), "" when off;
    # `otel`: those settings (the environment's over .env's), handed to the OpenTelemetry SDK
    traces: str = ""
    otel: tuple[tuple[str, str], ...] = ()
    # security (README "Security")
    # empty: 127.0.0.1 while protected mode is possible, else 0.0.0.0 (api.auth.listen_host);
    # protected mode refuses to listen beyond loopback
    api_host: str = ""
    auth: str = "auto"  # auto: protected mode (loopback only) while no token exists; required: always a token
    admin_token: str = ""  # deployments: a token from a secret, accepted with scope admin (stored hashed)
    metrics_token: str = ""  # set: GET /metrics wants this bearer token (or a read token)
    # console sign-in with OpenID Connect (docs/sign-in.md): on when oidc_issuer is set
    oidc_issuer: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = ""  # never logged; a placeholder refuses to start
    oidc_redirect_base: str = ""  # the console's own URL as browsers reach it: the callback is under it
    oidc_provider_name: str = ""  # the sign-in button's words (empty: the issuer's host)
    oidc_groups_claim: str = "groups"
    oidc_groups: GroupGrants = ()  # group -> scopes (cronos.signin_grants)
    oidc_session_s: float = 8 * 3600.0  # a console session ends this long after sign-in
    http_allow_nets: tuple[str, ...] = ()  # CIDRs http jobs may reach despite the SSRF guard
    http_max_redirects: int = 5  # hops followed when a job sets follow_redirects
    # requests in flight at once per host (scheme, host, port) on each executor (cronos.host_limits)
    http_host_limits: tuple[HostLimit, ...] = ()
    job_payload_max_bytes: int = 65_536  # encoded size bound of a job's payload
    history_page_max_bytes: int = 1_048_576  # a page of a job's history or revisions stops at about this size
    history_value_max_bytes: int = 4096  # ... where a field's value past this is shown as its size and digest
    max_queues: int = 100  # queues jobs may name in all (each is a stream the leader tends)
    herd_jobs: int = 100  # a schedule warning (code herd) when this many active jobs start in one minute
    # clients: `cronos jobs|runs|apply` talk to this API with this token (empty: none, protected mode)
    api_url: str = "http://127.0.0.1:3002"
    api_token: str = ""
    namespace: str = "default"  # the namespace they act in (cronos.namespaces; `--namespace` overrides)
    # notifications (docs/notifications.md): sent by the leader
    console_url: str = ""  # links in notifications point here (empty: CRONOS_API_URL)
    notify_timeout_s: float = 10.0  # one send (HTTP request, SMTP session) at most this long
    notify_max_attempts: int = 10  # a delivery that failed this many times ends `failed`
    notify_retry_base_s: float = 5.0  # retries back off from this, doubling, with jitter ...
    notify_retry_cap_s: float = 900.0  # ... up to this


def _number(cast: Callable[[str], N], lo: N, hi: N) -> Callable[[str], N]:
    def parse(raw: str) -> N:
        value = cast(raw)
        if not lo <= value <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return value

    return parse


def _int(lo: int, hi: int) -> Callable[[str], int]:
    return _number(int, lo, hi)


def _float(lo: float, hi: float) -> Callable[[str], float]:
    return _number(float, lo, hi)


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be 1/0, true/false, yes/no or on/off")


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip()
        upper_ok = value.upper() in allowed
        if value not in allowed and not upper_ok:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value.upper() if upper_ok else value

    return parse


def _url(*schemes: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip()
        if not value.startswith(tuple(f"{s}://" for s in schemes)):
            raise ValueError(f"must be a URL starting with {' or '.join(s + '://' for s in schemes)}")
        return value

    return parse


_AGE = re.compile(r"(\d+(?:\.\d+)?)([hdw]?)")
_AGE_UNIT_S = {"h": 3600, "d": 86_400, "w": 7 * 86_400}


def _retention(raw: str) -> float:
    """`30d`, `36h`, `2w`, or a number of days; `0` keeps everything. In seconds."""
    match = _AGE.fullmatch(raw.strip().lower())
    if match is None:
        raise ValueError("must be an age such as 30d, 36h or 2w (a bare number: days), or 0 to keep all")
    seconds = float(match[1]) * _AGE_UNIT_S[match[2] or "d"]
    if seconds != 0 and not 3600 <= seconds <= 100 * 365 * 86_400:
        raise ValueError("must be 0 (keep all) or between 1h and 100 years")
    return seconds


def _prefix(raw: str) -> str:
    if not raw or any(c in raw for c in " {}\n"):
        raise ValueError("must be non-empty without spaces or braces")
    return raw


def _networks(raw: str) -> tuple[str, ...]:
    """Comma-separated CIDRs (or bare addresses), normalized: `10.0.0.0/8, ::1` -> ('10.0.0.0/8', '::1/128')."""
    nets = []
    for part in raw.split(","):
        if part.strip():
            try:
                nets.append(str(ipaddress.ip_network(part.strip(), strict=False)))
            except ValueError:
                raise ValueError(f"must be comma-separated CIDRs; {part.strip()!r} is not one") from None
    return tuple(nets)


def _host(raw: str) -> str:
    value = raw.strip()  # empty: chosen by the auth mode (api.auth.listen_host)
    if any(c.isspace() for c in value):
        raise ValueError("must be an address or host name to listen on, such as 0.0.0.0 or 127.0.0.1")
    return value


def _secret(raw: str) -> str:
    value = raw.strip()
    if value and (why := token_refusal(value)) is not None:
        raise ValueError(why)
    return value


def _base_url(raw: str) -> str:
    """An http(s) URL others go on from (an issuer, the console's address): no trailing slash; empty: off."""
    if not raw.strip():
        return ""
    value = _url("http", "https")(raw).rstrip("/")
    if any(c in value for c in "?# "):
        raise ValueError("must be an http(s) URL without query or fragment (empty: off)")
    return value


def _token(raw: str) -> str:
    value = raw.strip()
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError("must be a token without spaces or control characters (or empty: none)")
    return value


def _namespace(raw: str) -> str:
    value = raw.strip()
    if re.fullmatch(namespaces.PATTERN, value) is None:
        raise ValueError(f"must be a namespace name: {namespaces.RULE}")
    return value


def _user(raw: str) -> str:
    value = raw.strip()
    if any(c.isspace() or not c.isprintable() or c in ":/" for c in value):
        raise ValueError("must be a user name (or empty: the executor's own user)")
    return value


def _queues(raw: str) -> tuple[str, ...]:
    try:
        return parse_queues(raw)
    except InvalidInput as exc:
        raise ValueError(f"must be a comma-separated list of queue names: {exc.message}") from None


def _names(raw: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if any(len(name) > 200 for name in names):
        raise ValueError("must be comma-separated job names (each 200 characters at most)")
    return names


MAX_METRIC_LABEL_KEYS = 5  # each distinct value of each key is a series: keep it few


def _label_keys(raw: str) -> tuple[str, ...]:
    keys = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if len(keys) > MAX_METRIC_LABEL_KEYS:
        raise ValueError(f"at most {MAX_METRIC_LABEL_KEYS} label keys (each value of each is a series)")
    for key in keys:
        if (why := key_refusal(key)) is not None:
            raise ValueError(f"{key!r} {why}")
    names = [prometheus_label(key) for key in keys]
    if len(set(names)) != len(names):
        raise ValueError("two keys would be the same Prometheus label (/, . and - all become _)")
    return keys


def _labels(raw: str) -> str:
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    for part in parts:
        key, sep, value = part.partition("=")
        if not (sep and key and value):
            raise ValueError(f"each label must be key=value, and '{part}' is not")
    return ",".join(parts)


def _breaker_defaults(raw: str) -> QueueDefaults:
    defaults = parse_defaults(raw)
    for queue, _ in defaults:
        try:
            parse_queues(queue)
        except InvalidInput as exc:
            raise ValueError(f"{queue!r} must be a queue name: {exc.message}") from None
    return defaults


def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw.strip()


# variable -> (field, parser, help). The CLI prints this table for --help.
VARIABLES: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "PORT": ("port", _int(1, 65535), "HTTP port of the API"),
    "DATABASE_URL": ("database_url", _url("postgresql", "postgres"), "PostgreSQL DSN"),
    "REDIS_URL": (
        "redis_url",
        _url("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"),
        "Redis URL (redis+cluster://host:port: a Redis Cluster, through any of its nodes)",
    ),
    "CRONOS_NODE_ID": ("node_id", _text, "this process's node id (default host-pid)"),
    "CRONOS_KEY_PREFIX": ("key_prefix", _prefix, "prefix of every Redis key"),
    "CRONOS_LOG_LEVEL": ("log_level", _choice(*_LOG_LEVELS), "DEBUG, INFO, WARNING or ERROR"),
    "CRONOS_LOG_FORMAT": ("log_format", _choice(*_LOG_FORMATS), "auto (json unless a terminal), json or text"),
    "CRONOS_EVENT_LOOP": ("event_loop", _choice(*EVENT_LOOPS), "the roles' event loop: uvloop (less CPU) or asyncio"),
    "CRONOS_LEADER_TTL_MS": ("leader_ttl_ms", _int(300, 600_000), "leader lock ttl in ms"),
    "CRONOS_LEADER_DB_TIMEOUT_MS": (
        "leader_db_timeout_ms",
        _int(100, 600_000),
        "a leader whose PostgreSQL ping takes longer steps down (keep it well under the ttl)",
    ),
    "CRONOS_RESYNC_INTERVAL_S": ("resync_interval_s", _float(0.1, 86_400), "full job resync period"),
    "CRONOS_STREAM_MAXLEN": ("stream_maxlen", _int(1000, 100_000_000), "approximate run stream bound"),
    "CRONOS_PUSH_LEAD_MS": ("push_lead_ms", _int(0, 1000), "push tokens this long before due (lock early)"),
    "CRONOS_OVERDUE_AFTER_MS": (
        "overdue_after_ms",
        _int(0, 3_600_000),
        "the leader re-pushes a queued run whose token went out but nobody claimed this long past due (0: off)",
    ),
    "CRONOS_CONSUMER_IDLE_REMOVE_S": (
        "consumer_idle_remove_s",
        _float(0, 604_800),
        "the leader removes the stream-group consumer of an executor gone (no heartbeat) and idle this long,"
        " once nothing is pending for it (0: never)",
    ),
    "CRONOS_CATCHUP_MAX_PER_S": (
        "catchup_max_per_s",
        _float(0.01, 1_000_000),
        "late runs of a catch-up (after an outage or failover) start at most this many a second",
    ),
    "CRONOS_BACKFILL_MAX_RUNS": (
        "backfill_max_runs",
        _int(1, 10_000),
        "runs one backfill may queue (more: a 422 naming `to`, narrow the range)",
    ),
    "CRONOS_BACKFILL_MAX_PER_S": (
        "backfill_max_per_s",
        _float(0.01, 1000),
        "a backfill's fastest pace, runs released a second (a faster `pace`: 422; the default pace is held to it)",
    ),
    "CRONOS_BACKFILL_MAX_ACTIVE_PER_JOB": (
        "backfill_max_active_per_job",
        _int(1, 100),
        "backfills of one job releasing runs at once (one more: 409 until the first has released its last)",
    ),
    "CRONOS_BACKFILL_MAX_ACTIVE_PER_TOKEN": (
        "backfill_max_active_per_token",
        _int(1, 1000),
        "backfills one token (or caller) may have releasing runs at once, over all jobs (one more: 429)",
    ),
    "CRONOS_AUDIT_INTERVAL_S": (
        "audit_interval_s",
        _float(0.1, 86_400),
        "the leader checks every tick of this long a window against the ledger, this often",
    ),
    "CRONOS_AUDIT_SETTLE_S": ("audit_settle_s", _float(0, 86_400), "audited windows end this long ago"),
    "CRONOS_RUNS_RETENTION": (
        "runs_retention_s",
        _retention,
        "leader drops runs older than this, a whole day at a time (30d, 36h, 2w; 0: keep all)",
    ),
    "CRONOS_HEALTH_INTERVAL_S": (
        "health_interval_s",
        _float(0.1, 3600),
        "the leader derives job events (failed, late start, overran...) and verdicts this often",
    ),
    "CRONOS_BREAKER_DEFAULT_FAILURES": (
        "breaker_default_failures",
        _int(0, 1_000_000),
        "a job whose runs failed this many times in a row pauses itself (0: never)",
    ),
    "CRONOS_BREAKER_DEFAULTS": (
        "breaker_defaults",
        _breaker_defaults,
        "a default breaker per queue, queue=failures[:canary_every],... (etl=3:5): for the jobs of the queue, "
        "each setting a job's own expectations.breaker leaves unset",
    ),
    "CRONOS_JOB_METRICS_MAX": (
        "job_metrics_max",
        _int(0, 100_000),
        "per-job metric series the leader exports at most; jobs beyond: cronos_job_metrics_dropped (0: none)",
    ),
    "CRONOS_JOB_METRICS_JOBS": (
        "job_metrics_jobs",
        _names,
        "export per-job metrics only for these job names, comma-separated, `*` and `?` as globs (empty: any)",
    ),
    "CRONOS_METRIC_LABEL_KEYS": (
        "metric_label_keys",
        _label_keys,
        f"job label keys (comma-separated, at most {MAX_METRIC_LABEL_KEYS}) added to the per-job series as label_<key>",
    ),
    "CRONOS_EXECUTOR_CONCURRENCY": ("executor_concurrency", _int(1, 10_000), "runs executing at once per executor"),
    "CRONOS_EXECUTOR_PREFETCH": (
        "executor_prefetch",
        _int(1, 1_000_000),
        "run tokens an executor holds at once (waiting for their due time, executing or being recorded)",
    ),
    "CRONOS_QUEUES": (
        "executor_queues",
        _queues,
        "queues an executor serves, comma-separated (`cronos executor --queue` wins); jobs name theirs",
    ),
    "CRONOS_RUN_LEASE_S": ("run_lease_s", _float(0.3, 3600), "run lease, renewed every third"),
    "CRONOS_DRAIN_TIMEOUT_S": ("drain_timeout_s", _float(0, 3600), "graceful drain deadline on SIGTERM"),
    "CRONOS_CANCEL_GRACE_S": (
        "cancel_grace_s",
        _float(0, 3600),
        "how long a cancelled running run may stop by itself before its work is cancelled (shell: killed)",
    ),
    "CRONOS_ALLOW_SHELL": ("allow_shell", _bool, "allow `shell` jobs on this executor"),
    "CRONOS_EXECUTOR_LABELS": (
        "executor_labels",
        _labels,
        "this executor's labels, `k=v,k2=v2`: a per-host job with `hosts.label` runs only where it matches",
    ),
    "CRONOS_SHELL_USER": (
        "shell_user",
        _user,
        "run `shell` jobs as this user (needs a root executor; empty: the executor's user, who can read its secrets)",
    ),
    "CRONOS_RESULT_MAX_BYTES": ("result_max_bytes", _int(0, 1_048_576), "bound of a stored result excerpt"),
    "CRONOS_RESERVE_AHEAD": (
        "reserve_ahead",
        _bool,
        "reserve runs when their token arrives ahead of due, only start them at the due instant (docs/lifecycle.md)",
    ),
    "CRONOS_OUTPUT_MAX_LINES": (
        "output_max_lines",
        _int(0, 1_000_000),
        "lines of a run's output kept: the first and last halves, the cut stated (0: no output kept)",
    ),
    "CRONOS_OUTPUT_MAX_BYTES": (
        "output_max_bytes",
        _int(0, 1_073_741_824),
        "bytes of a run's output kept, the first and last halves (0: no output kept)",
    ),
    "CRONOS_METRICS_PORT": ("metrics_port", _int(0, 65535), "/metrics, /livez, /readyz port (0: off)"),
    "CRONOS_API_HOST": (
        "api_host",
        _host,
        "address the API listens on (empty: 127.0.0.1 with CRONOS_AUTH=auto, 0.0.0.0 with required); "
        "auto refuses any but loopback",
    ),
    "CRONOS_AUTH": (
        "auth",
        _choice("auto", "required"),
        "auto (loopback-only until a token is first created) or required",
    ),
    "CRONOS_ADMIN_TOKEN": ("admin_token", _secret, "an admin token from a secret, for deployments (empty: none)"),
    "CRONOS_METRICS_TOKEN": ("metrics_token", _secret, "bearer token for GET /metrics (empty: a read token)"),
    "CRONOS_OIDC_ISSUER": ("oidc_issuer", _base_url, "console sign-in: the OpenID provider's issuer URL (empty: off)"),
    "CRONOS_OIDC_CLIENT_ID": ("oidc_client_id", _token, "console sign-in: this console's client id at the provider"),
    "CRONOS_OIDC_CLIENT_SECRET": ("oidc_client_secret", _secret, "console sign-in: the client's secret"),
    "CRONOS_OIDC_REDIRECT_BASE": (
        "oidc_redirect_base",
        _base_url,
        "console sign-in: the console's URL as browsers reach it (https: the cookie is Secure)",
    ),
    "CRONOS_OIDC_PROVIDER_NAME": ("oidc_provider_name", str.strip, "the words of 'Sign in with ...' (empty: the host)"),
    "CRONOS_OIDC_GROUPS_CLAIM": ("oidc_groups_claim", _token, "the ID token's claim that lists the person's groups"),
    "CRONOS_OIDC_GROUPS": (
        "oidc_groups",
        parse_group_grants,
        'group to scope, as JSON ({"ops":"admin","devs":"write"}) or ops=admin,devs=write; other groups: none',
    ),
    "CRONOS_OIDC_SESSION_S": ("oidc_session_s", _float(60, 30 * 86_400), "a console session's lifetime after sign-in"),
    "CRONOS_HTTP_ALLOW_NETS": ("http_allow_nets", _networks, "CIDRs http jobs may reach despite the SSRF guard"),
    "CRONOS_HTTP_MAX_REDIRECTS": ("http_max_redirects", _int(0, 20), "redirect hops when a job follows them"),
    "CRONOS_HTTP_HOST_LIMITS": (
        "http_host_limits",
        parse_host_limits,
        f"http requests in flight at once per host on each executor, as HOST=N,... (api.example.com=5,"
        f"*.internal=10,*=64; 0: no limit; a host no entry names: {DEFAULT_HOST_LIMIT}); beyond it, runs wait",
    ),
    "CRONOS_JOB_PAYLOAD_MAX_BYTES": ("job_payload_max_bytes", _int(1024, 1_048_576), "bound of a job's payload"),
    "CRONOS_HISTORY_PAGE_MAX_BYTES": (
        "history_page_max_bytes",
        _int(16_384, 64 * 1_048_576),
        "a page of a job's history or revisions ends early past about this size (next_cursor goes on)",
    ),
    "CRONOS_HISTORY_VALUE_MAX_BYTES": (
        "history_value_max_bytes",
        _int(256, 1_048_576),
        "in those pages, a field's value larger than this is shown as {truncated, bytes, hash}",
    ),
    "CRONOS_MAX_QUEUES": ("max_queues", _int(1, 10_000), "queues jobs may name in all (a job naming one more: 422)"),
    "CRONOS_HERD_JOBS": (
        "herd_jobs",
        _int(2, 10_000_000),
        "active jobs starting in one minute that make a herd warning",
    ),
    "CRONOS_API_URL": (
        "api_url",
        _url("http", "https"),
        "the API that `cronos jobs|runs|apply` call (unset: http://127.0.0.1:$PORT)",
    ),
    "CRONOS_API_TOKEN": ("api_token", _token, "bearer token `cronos jobs|runs|apply` send (empty: none)"),
    "CRONOS_NAMESPACE": ("namespace", _namespace, "the namespace `cronos jobs|runs|apply` act in (`--namespace`)"),
    "CRONOS_CONSOLE_URL": ("console_url", _url("http", "https"), "the console's address, for links in notifications"),
    "CRONOS_NOTIFY_TIMEOUT_S": ("notify_timeout_s", _float(0.1, 300), "bound of one notification send"),
    "CRONOS_NOTIFY_MAX_ATTEMPTS": ("notify_max_attempts", _int(1, 100), "sends of a notification before it fails"),
    "CRONOS_NOTIFY_RETRY_BASE_S": ("notify_retry_base_s", _float(0.01, 3600), "first retry delay of a notification"),
    "CRONOS_NOTIFY_RETRY_CAP_S": ("notify_retry_cap_s", _float(0.01, 86_400), "longest retry delay of a notification"),
}

# The settings that take a token (cronos.secret_strength refuses a placeholder or a guessable one).
TOKEN_VARIABLES = tuple(name for name, (_field, parse, _help) in VARIABLES.items() if parse is _secret)


def default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


_OIDC_NEEDS = (
    ("oidc_client_id", "CRONOS_OIDC_CLIENT_ID"),
    ("oidc_client_secret", "CRONOS_OIDC_CLIENT_SECRET"),
    ("oidc_redirect_base", "CRONOS_OIDC_REDIRECT_BASE"),
)


def _check_oidc(fields: Mapping[str, Any]) -> None:
    """Sign-in is all or nothing: an issuer without its client's id, secret or URL refuses to start."""
    if not fields.get("oidc_issuer"):
        return
    missing = [name for field, name in _OIDC_NEEDS if not fields.get(field)]
    if missing:
        raise ConfigError(f"CRONOS_OIDC_ISSUER is set, so {', '.join(missing)} must be set too (docs/sign-in.md)")


def load_settings(
    environ: Mapping[str, str] | None = None, env_file: str | Path | None = ".env", **overrides: Any
) -> Settings:
    """Build Settings from `.env` (if present) overlaid by the environment, then overrides.

    Raises ConfigError naming the variable and what is wrong with it.
    """
    merged: dict[str, str] = {}
    if env_file is not None and Path(env_file).is_file():
        merged.update({k: v for k, v in dotenv_values(env_file).items() if v is not None})
    merged.update(os.environ if environ is None else environ)
    fields: dict[str, Any] = {}
    for name, (field, parse, _help) in VARIABLES.items():
        raw = merged.get(name)
        if raw is None:
            continue
        try:
            fields[field] = parse(raw)
        except ValueError as exc:
            reason = str(exc) if "must" in str(exc) else f"not a valid value ({raw!r})"
            raise ConfigError(f"{name}: {reason}") from exc
    fields["otel"] = tuple(sorted((name, value) for name, value in merged.items() if name.startswith("OTEL_")))
    try:
        fields["traces"] = traces.exporter(dict(fields["otel"]))
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if "api_url" not in fields and "port" in fields:
        # The CLI talks to the API this environment runs: one that sets only PORT means this host's.
        fields["api_url"] = f"http://127.0.0.1:{fields['port']}"
    fields.update(overrides)
    _check_oidc(fields)
    if not fields.get("node_id"):
        fields["node_id"] = default_node_id()
    return Settings(**fields)
