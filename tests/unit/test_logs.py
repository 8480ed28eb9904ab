"""cronos/logs.py: JSON lines with bound context, masked secrets, text on a terminal."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cronos.logs import JsonFormatter, TextFormatter, bind, bind_global, bind_secrets, mask_secrets, setup_logging
from cronos.redact import secret_values

DSN = "postgresql://cronos:s3cret-pw@db.internal:5432/cronos"
REDIS = "redis://:r3dis-pw@cache:6379/0"


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO, Callable[[logging.Formatter], None]]]:
    """A private logger writing to a buffer; the formatter is chosen per test."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    logger = logging.getLogger(f"cronos.test_logs.{id(buffer)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield logger, buffer, handler.setFormatter
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def root_logging() -> Iterator[None]:
    """setup_logging() replaces the root handlers: put them back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    access_level = logging.getLogger("aiohttp.access").level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger("aiohttp.access").setLevel(access_level)


def _json_lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def _isolated(fn: Callable[[], None]) -> None:
    """Run in a copy of the context so bind_global() does not leak into other tests."""
    contextvars.copy_context().run(fn)


def test_json_line_carries_event_and_bound_run_fields(capture: Any) -> None:
    logger, buffer, set_formatter = capture
    set_formatter(JsonFormatter())

    def body() -> None:
        bind_global(node_id="exec-1")
        with bind(job_id=7, run_id=42, epoch=3, attempt=1):
            logger.info("run started", extra={"event": "run.started", "kind": "http"})
        logger.info("idle", extra={"event": "executor.idle"})

    _isolated(body)
    started, idle = _json_lines(buffer)
    assert started["event"] == "run.started"
    assert started["msg"] == "run started"
    assert started["level"] == "info"
    assert (started["node_id"], started["job_id"], started["run_id"], started["epoch"]) == ("exec-1", 7, 42, 3)
    assert started["attempt"] == 1 and started["kind"] == "http"
    assert started["ts"].endswith("+00:00")
    # Leaving bind() drops the run fields; the process-wide node_id stays.
    assert idle["event"] == "executor.idle" and idle["node_id"] == "exec-1"
    assert not {"job_id", "run_id", "epoch"} & set(idle)


def test_line_without_event_uses_the_message(capture: Any) -> None:
    logger, buffer, set_formatter = capture
    set_formatter(JsonFormatter())
    logger.warning("plain %s", "text")
    (line,) = _json_lines(buffer)
    assert line["event"] == "plain text" and line["level"] == "warning"


async def test_bound_fields_are_task_local(capture: Any) -> None:
    """Two runs executing concurrently each log their own ids."""
    logger, buffer, set_formatter = capture
    set_formatter(JsonFormatter())
    both_bound = asyncio.Barrier(2)

    async def run(run_id: int) -> None:
        with bind(job_id=1, run_id=run_id, epoch=9):
            await both_bound.wait()
            logger.info("run finished", extra={"event": "run.finished"})

    await asyncio.gather(run(100), run(200))
    lines = _json_lines(buffer)
    assert sorted(line["run_id"] for line in lines) == [100, 200]
    assert all(line["epoch"] == 9 and line["job_id"] == 1 for line in lines)


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()], ids=["json", "text"])
def test_passwords_in_urls_are_masked(capture: Any, formatter: logging.Formatter) -> None:
    logger, buffer, set_formatter = capture
    set_formatter(formatter)
    logger.info("connecting to %s", DSN, extra={"event": "db.connecting", "redis_url": REDIS})
    try:
        raise ConnectionError(f"cannot reach {DSN}")
    except ConnectionError:
        logger.exception("backend down", extra={"event": "db.down"})
    out = buffer.getvalue()
    assert "s3cret-pw" not in out and "r3dis-pw" not in out
    assert "postgresql://cronos:***@db.internal:5432/cronos" in out
    assert "redis://:***@cache:6379/0" in out


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()], ids=["json", "text"])
def test_query_secrets_and_authorization_are_masked(capture: Any, formatter: logging.Formatter) -> None:
    logger, buffer, set_formatter = capture
    set_formatter(formatter)
    url = "https://api.example.com/hook?page=2&token=t0k3n-value&api_key=k3y-value"
    logger.warning(
        "run failed", extra={"event": "run.failed", "error": f"http request failed: cannot connect to {url}"}
    )
    logger.info("sent %s", {"Authorization": "Bearer b34rer-value"}, extra={"event": "x"})
    logger.info("argv", extra={"event": "y", "argv": ["curl", "-H", "Authorization: Basic YmFzaWM6dmFsdWU="]})
    out = buffer.getvalue()
    for secret in ("t0k3n-value", "k3y-value", "b34rer-value", "YmFzaWM6dmFsdWU"):
        assert secret not in out, out
    assert "?page=2&token=***&api_key=***" in out


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("GET /x?token=abc&page=2", "GET /x?token=***&page=2"),
        ('"url":"https://h/p?X-Amz-Signature=ab12&x=1"', '"url":"https://h/p?X-Amz-Signature=***&x=1"'),
        ("https://h/?password=p%20w#frag", "https://h/?password=***#frag"),
        ("Authorization: Bearer eyJh.eyJz.sig", "Authorization: ***"),
        ("{'authorization': 'Basic dXNlcg=='}", "{'authorization': '***'}"),
        ("got bearer abc.def from the proxy", "got bearer *** from the proxy"),
    ],
)
def test_mask_secrets(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked


@pytest.mark.parametrize(
    "text",
    ["job_id=5 state=completed duration_ms=3.2", "GET /api/jobs?limit=50&cursor=aWQ6NQ", "a ? b & c = d",
     "password reset requested", "the authorization scope is write"],
)  # fmt: skip
def test_mask_secrets_leaves_ordinary_text_alone(text: str) -> None:
    assert mask_secrets(text) == text


def test_mask_secrets_leaves_urls_without_password_alone() -> None:
    assert (
        mask_secrets("redis://cache:6379/0 and postgresql://u@h/db") == "redis://cache:6379/0 and postgresql://u@h/db"
    )
    assert mask_secrets("amqp://guest:guest@rabbit:5672/") == "amqp://guest:***@rabbit:5672/"


def test_text_format_is_human_readable(capture: Any) -> None:
    logger, buffer, set_formatter = capture
    set_formatter(TextFormatter())

    def body() -> None:
        bind_global(node_id="disp-2")
        with bind(job_id=5, run_id=6, epoch=4):
            logger.info("tick pushed", extra={"event": "tick.pushed"})

    _isolated(body)
    line = buffer.getvalue().strip()
    assert "INFO" in line and "tick pushed [tick.pushed]" in line
    assert "node_id=disp-2" in line and "job_id=5" in line and "run_id=6" in line and "epoch=4" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def _root_formatter() -> logging.Formatter | None:
    (handler,) = logging.getLogger().handlers
    return handler.formatter


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_auto_format_is_text_on_a_terminal(root_logging: None, monkeypatch: pytest.MonkeyPatch) -> None:
    controller, terminal = os.openpty()
    with os.fdopen(terminal, "w") as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        setup_logging("INFO", "auto")
        assert isinstance(_root_formatter(), TextFormatter)
        logging.getLogger("cronos.test").info("on a terminal", extra={"event": "t.tty"})
        tty.flush()
        shown = os.read(controller, 4096).decode()
    os.close(controller)
    assert "on a terminal [t.tty]" in shown


def test_auto_format_is_json_when_not_a_terminal(root_logging: None, monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()  # isatty() is False, as for a container's log pipe
    monkeypatch.setattr(sys, "stderr", pipe)
    setup_logging("DEBUG", "auto")
    assert isinstance(_root_formatter(), JsonFormatter)
    logging.getLogger("cronos.test").debug("in a container", extra={"event": "t.pipe", "job_id": 3})
    (line,) = _json_lines(pipe)
    assert line["event"] == "t.pipe" and line["job_id"] == 3 and line["level"] == "debug"


@pytest.mark.parametrize(("fmt", "expected"), [("json", JsonFormatter), ("text", TextFormatter)])
def test_explicit_format_wins_over_detection(
    root_logging: None, monkeypatch: pytest.MonkeyPatch, fmt: str, expected: type[logging.Formatter]
) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    setup_logging("INFO", fmt)
    assert isinstance(_root_formatter(), expected)


# --- a run's own secret values (issue 22, item 10) --------------------------------------------


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()])
def test_bound_secrets_are_scrubbed_from_message_traceback_and_fields(
    capture: tuple[logging.Logger, io.StringIO, Callable[[logging.Formatter], None]], formatter: logging.Formatter
) -> None:
    logger, buffer, use = capture
    use(formatter)
    values = secret_values("task", {"action": "x", "password": "hunter2-pw", "opts": {"api_token": 'to"ken-9'}})

    def log() -> None:
        with bind_secrets(values):
            logger.info("login with %s", "hunter2-pw", extra={"creds": {"token": 'to"ken-9'}})
            try:
                raise RuntimeError("refused: hunter2-pw")
            except RuntimeError:
                logger.exception("failed")
        logger.info("after the run: hunter2-pw")  # outside the block: nothing to scrub

    _isolated(log)
    out = buffer.getvalue()
    assert "login with ***" in out and "RuntimeError: refused: ***" in out and "Traceback" in out
    assert 'to\\"ken-9' not in out and 'to"ken-9' not in out  # an extra field, JSON-escaped or not
    assert out.count("hunter2-pw") == out.count("after the run: hunter2-pw") > 0


def test_bound_secrets_are_scrubbed_from_the_record_itself(caplog: pytest.LogCaptureFixture) -> None:
    """Any handler gets the record scrubbed (pytest's here), not only our formatters' lines."""
    caplog.set_level(logging.INFO)
    logger = logging.getLogger("cronos.test_logs.records")

    def log() -> None:
        with bind_secrets(secret_values("shell", {"argv": ["x"], "env": {"API_TOKEN": "abcd-1234"}})):
            try:
                raise ValueError("abcd-1234")
            except ValueError:
                logger.exception("token %r", "abcd-1234")

    _isolated(log)
    (record,) = caplog.records
    assert record.getMessage() == "token '***'" and record.exc_info is None
    assert record.exc_text is not None and "ValueError: ***" in record.exc_text
    assert "abcd-1234" not in caplog.text


def test_nested_bindings_scrub_both_and_nothing_bound_is_free() -> None:
    def check() -> None:
        with bind_secrets(()), bind_secrets(("first-secret",)), bind_secrets(("second-secret-longer",)):
            record = logging.getLogger("cronos.test_logs.nested").makeRecord(
                "n", logging.INFO, "f", 1, "%s %s", ("first-secret", "second-secret-longer"), None
            )
        assert record.getMessage() == "*** ***"

    _isolated(check)
