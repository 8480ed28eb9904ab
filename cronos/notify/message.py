"""What a notification says: one message (JSON, as a webhook receives it) built from the event, its
job, its run, the tick's explanation (cronos.ticks, as GET /api/jobs/{id}/ticks explains it) and a
console link; and the same message as one Slack text, or an email's subject and plain-text body.

Pure. The message is built when the event is routed and stored with the delivery, so every
retry sends the same thing; it holds no secret (a run's error is an excerpt of what the run
record shows, which the executor has already scrubbed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import msgspec

ERROR_EXCERPT_CHARS = 500
TEST = "test"

# What each event kind says in a sentence (`{job}` is the job's name).
_HEADLINES = {
    "failed": "{job} failed",
    "recovered": "{job} recovered",
    "missed": "{job} missed a tick",
    "late_start": "{job} started late",
    "overran": "{job} is overrunning",
    "too_fast": "{job} finished too fast",
    "no_success": "{job} has not succeeded in its period",
    "skipped": "{job} skipped a tick",
    "cancelled": "{job} was cancelled",
    "paused_by_breaker": "{job} was paused by its circuit breaker",
    "canary_by_breaker": "{job}'s circuit breaker let a canary run through",
    "resumed_by_breaker": "{job} was resumed by its circuit breaker after a canary succeeded",
    "started": "{job} started",
    "completed": "{job} completed",
    "ended": "{job} ended",
    TEST: "Test notification from Cronos",
}
# Whitespace other than a space (line and paragraph separators, tabs, NEL...): a name shown on one line.
_NOT_ONE_LINE = re.compile(r"[^\S ]")
# What Slack's mrkdwn reads as markup: `<!channel>` pings, `<url|text>` disguises a link.
_SLACK_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


class RunFacts(msgspec.Struct, kw_only=True):
    id: int
    state: str
    scheduled_for: datetime
    attempt: int
    error: str | None = None


def console_link(base_url: str, run_id: int | None, job_id: int | None) -> str | None:
    """The console page of the run (else of the job): `<base>/#/runs/ID`."""
    if not base_url:
        return None
    base = base_url.rstrip("/")
    if run_id is not None:
        return f"{base}/#/runs/{run_id}"
    if job_id is not None:
        return f"{base}/#/jobs/{job_id}"
    return f"{base}/"


def excerpt(error: str | None) -> str | None:
    if error is None or len(error) <= ERROR_EXCERPT_CHARS:
        return error
    return error[: ERROR_EXCERPT_CHARS - 1] + "…"


def build(
    *,
    event: Mapping[str, Any],
    job: Mapping[str, Any] | None,
    run: RunFacts | None,
    tick: Mapping[str, Any] | None,
    link: str | None,
) -> dict[str, Any]:
    """The message: `type` (`job.failed`, ... or `cronos.test`), the event, the job, the run (its
    error an excerpt), the tick's explanation and the console link."""
    kind = str(event.get("kind", TEST))
    shown_run = None
    if run is not None:
        shown_run = msgspec.to_builtins(msgspec.structs.replace(run, error=excerpt(run.error)))
    return {
        "type": "cronos.test" if kind == TEST else f"job.{kind}",
        "event": msgspec.to_builtins(dict(event)),
        "job": None if job is None else dict(job),
        "run": shown_run,
        "tick": None if tick is None else msgspec.to_builtins(dict(tick)),
        "link": link,
    }


def minimal(*, event: Mapping[str, Any], job: Mapping[str, Any]) -> dict[str, Any]:
    """The message of an event whose full message could not be built: the event (no detail) and
    its job, the same shape with the rest null."""
    return {
        "type": f"job.{event['kind']}",
        "event": msgspec.to_builtins(dict(event)),
        "job": dict(job),
        "run": None,
        "tick": None,
        "link": None,
    }


def headline(message: Mapping[str, Any]) -> str:
    event = message.get("event") or {}
    job = message.get("job") or {}
    name = job.get("name") or (f"job {job['id']}" if job.get("id") is not None else "a job")
    text = _HEADLINES.get(str(event.get("kind", TEST)), "{job}: " + str(event.get("kind")))
    return text.format(job=one_line(str(name)))


def one_line(text: str) -> str:
    """`text` on one line: every whitespace but a space (U+2028 and U+2029 included) a space."""
    return _NOT_ONE_LINE.sub(" ", text)


def slack_escaped(text: str) -> str:
    """`text` shown as it is in Slack's mrkdwn: `&`, `<`, `>` escaped as Slack asks."""
    return "".join(_SLACK_ESCAPES.get(c, c) for c in text)


def _lines(message: Mapping[str, Any]) -> list[str]:
    event = message.get("event") or {}
    run = message.get("run")
    tick = message.get("tick")
    detail = event.get("detail") or {}
    lines = []
    if run:
        lines.append(f"Run {run['id']} (attempt {run['attempt']}) of the tick {run['scheduled_for']}: {run['state']}")
        if run.get("error"):
            lines.append(f"Error: {run['error']}")
    reason = detail.get("reason")
    if reason:
        lines.append(f"Reason: {reason}")
    if detail.get("consecutive_failures"):
        lines.append(f"Consecutive failures: {detail['consecutive_failures']}")
    if event.get("kind") == "recovered" and detail.get("after_failures"):
        lines.append(f"After {detail['after_failures']} failures in a row")
    if tick:
        why = f" ({tick['reason']})" if tick.get("reason") else ""
        lines.append(
            f"Tick {tick['scheduled_for']} of {_schedule(tick)}, revision {tick['revision']}: {tick['outcome']}{why}"
        )
    if event.get("occurred_at"):
        lines.append(f"At: {event['occurred_at']}")
    if message.get("link"):
        lines.append(str(message["link"]))
    return lines


def _schedule(tick: Mapping[str, Any]) -> str:
    """The schedule a tick belongs to: a cron expression in its zone, an interval, or a one-off
    (the ticks API leaves `cron_expression` empty for the last two)."""
    if tick.get("every"):
        return f"every {tick['every']}"
    if tick.get("cron_expression"):
        return f"`{tick['cron_expression']}` ({tick['timezone']})"
    return "a one-off"


def slack_text(message: Mapping[str, Any]) -> str:
    """One readable text for a Slack-compatible incoming webhook (`{"text": ...}`); nothing of the
    job's, the run's or the event's (a name, an error) reads as markup."""
    return "\n".join([f"*{slack_escaped(headline(message))}*", *map(slack_escaped, _lines(message))])


def email(message: Mapping[str, Any]) -> tuple[str, str]:
    """The subject and the plain-text body of an email (cronos.notify.mail makes the headers safe)."""
    subject = f"[Cronos] {headline(message)}"
    body = "\n".join([headline(message) + ".", "", *_lines(message), "", "-- Cronos"])
    return subject, body + "\n"
