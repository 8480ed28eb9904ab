"""Structured logging: a stable event name plus fields, JSON in containers, text on a terminal.

Context (node_id, job_id, run_id, scheduled_for, attempt, epoch) is bound once with
`bind()` and carried by every line logged inside it. Secrets in URLs are masked, and a run's
own secret values (`bind_secrets`, cronos.redact.secret_values) are scrubbed from every line
logged while it runs: from each record as it is made (its message and traceback, whatever
handler gets it) and from each whole line our formatters write (extra fields too).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import logging
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import msgspec

from cronos.redact import scrub

# Never mutated in place: bind() sets a new dict, so an immutable empty default is safe.
_context: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "cronos_log_context", default=MappingProxyType({})
)

# The secret values of the run this task is working on, longest first (cronos.redact.secret_values).
_secrets: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("cronos_log_secrets", default=())

# user:password@ in any URL-ish string
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@\s]*@")
# ?token=... / &api_key=... : a query value under a sensitive name (cronos.redact's words).
_QUERY_SECRET = re.compile(
    r"(?P<keep>[?&;][^=&\s\"'#\\]*(?:token|secret|key|passw|pwd|auth|cookie|credential|session|sig)"
    r"[^=&\s\"'#\\]*=)[^&\s\"'#<>\\]+",
    re.IGNORECASE,
)
# Authorization: Basic xyz / 'authorization': 'Bearer xyz' / bearer tokens anywhere.
_AUTH_HEADER = re.compile(r"(?P<keep>authorization[\"']?\s*[:=]\s*[\"']?)(?:[a-z]+\s+)?[^\s\"',;}\\]+", re.IGNORECASE)
_BEARER = re.compile(r"(?P<keep>\bbearer\s+)[a-z0-9._~+/=-]+", re.IGNORECASE)

# LogRecord attributes that are not user fields.
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()) | {"message", "asctime"}


def mask_secrets(text: str) -> str:
    """URL passwords, query secrets and Authorization/Bearer values in `text` shown as ***."""
    # Most lines can hold none of them: four substring scans (~0.4 us on a 300-character line),
    # no regex. "uthoriz" and "earer" catch Authorization and Bearer as written, not in capitals.
    at, query = "@" in text, "?" in text or "&" in text
    auth = "earer" in text or "uthoriz" in text
    if not (at or query or auth):
        return text
    if at:
        text = _URL_PASSWORD.sub(r"\g<scheme>:***@", text)
    if query:
        text = _QUERY_SECRET.sub(r"\g<keep>***", text)
    if auth:
        text = _BEARER.sub(r"\g<keep>***", _AUTH_HEADER.sub(r"\g<keep>***", text))
    return text


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add fields to every log line emitted inside this block (task-local)."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


@contextlib.contextmanager
def bind_secrets(values: tuple[str, ...]) -> Iterator[None]:
    """Scrub `values` (cronos.redact.secret_values) from every line logged inside this block."""
    if not values:
        yield
        return
    _scrub_records()
    outer = _secrets.get()
    token = _secrets.set(tuple(sorted(set(outer) | set(values), key=lambda v: (-len(v), v))) if outer else values)
    try:
        yield
    finally:
        _secrets.reset(token)


_installed: list[Callable[..., logging.LogRecord]] = []  # the factory ours wraps, once installed


def _scrub_records() -> None:
    """Install (once) a record factory that scrubs the bound secrets from each record's message,
    traceback and stack as it is made: handlers other than ours (pytest's, an embedding
    application's) get them scrubbed too. Extra fields are set after the factory: our
    formatters scrub those."""
    if _installed:
        return
    base = logging.getLogRecordFactory()
    _installed.append(base)

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        values = _secrets.get()
        if values:
            record.msg, record.args = scrub(record.getMessage(), values), None
            if record.exc_info and record.exc_info[0] is not None:
                text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
                record.exc_text, record.exc_info = scrub(text, values), None  # the live exception holds them
            if record.stack_info:
                record.stack_info = scrub(record.stack_info, values)
        return record

    logging.setLogRecordFactory(make)


def _written(text: str) -> str:
    """A whole formatted line as it may be written: URL/Authorization secrets masked, the run's scrubbed."""
    return scrub(mask_secrets(text), _secrets.get())


def bind_global(**fields: Any) -> None:
    """Bind fields for the rest of this context (used once per process for node_id)."""
    _context.set({**_context.get(), **fields})


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = dict(_context.get())
    for key, value in record.__dict__.items():
        if key not in _RESERVED and key[0] != "_":
            fields[key] = value
    return fields


_second: list[Any] = [None, ""]  # [the whole second last formatted, its text up to the seconds]


def _timestamp(created: float) -> str:
    """`created` in UTC as ISO 8601 to the millisecond; the text up to the seconds is made once a
    second (an executor writes a line per run: a datetime per line was a tenth of one)."""
    second = int(created)
    if _second[0] != second:
        _second[:] = [second, dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")]
    return f"{_second[1]}.{int((created - second) * 1000):03d}+00:00"


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = _fields(record)
        message = record.getMessage()
        line: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "event": fields.pop("event", message),
            "msg": message,
            "logger": record.name,
            **fields,
        }
        if (exc := _exception(self, record)) is not None:
            line["exc"] = exc
        return _written(msgspec.json.encode(line, enc_hook=_default).decode())


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = _fields(record)
        event = fields.pop("event", None)
        ts = dt.datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]
        tail = " ".join(f"{k}={v}" for k, v in fields.items())
        head = f"{ts} {record.levelname:<7} {record.getMessage()}"
        if event:
            head += f" [{event}]"
        text = f"{head}  {tail}" if tail else head
        if (exc := _exception(self, record)) is not None:
            text += "\n" + exc
        return _written(text)


def _exception(formatter: logging.Formatter, record: logging.LogRecord) -> str | None:
    """The record's traceback: as already formatted (and scrubbed) when it was made, or now."""
    if record.exc_text:
        return record.exc_text
    return formatter.formatException(record.exc_info) if record.exc_info else None


def setup_logging(level: str = "INFO", fmt: str = "auto") -> None:
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # What no formatter of ours writes, not looked up for every record (the logging HOWTO's
    # "Optimization"): the caller's file and line (a walk up the stack), thread and process.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    # aiohttp's access log is one line per request; keep it but at the configured level.
    logging.getLogger("aiohttp.access").setLevel(max(logging.getLevelName(level), logging.WARNING))
