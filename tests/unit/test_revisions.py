"""The pure parts of cronos.store.revisions: what changed, which kind of revision, what it shows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cronos.models import JOB_WRITABLE, Job
from cronos.store.revisions import changed_fields, kind_of, shown

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _job(**fields: Any) -> Job:
    values: dict[str, Any] = {
        "id": 1,
        "name": "hook",
        "cron_expression": "* * * * *",
        "timezone": "UTC",
        "kind": "http",
        "payload": {"url": "https://example.com/a", "headers": {"Authorization": "Bearer s3cret"}},
        "timeout_s": 30.0,
        "max_retries": 0,
        "retry_backoff_s": 10.0,
        "concurrency_policy": "forbid",
        "misfire_policy": "run_once",
        "misfire_grace_s": 60.0,
        "jitter_s": 0.0,
        "status": "active",
        "revision": 1,
        "last_scheduled_for": None,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return Job(**(values | fields))


def _merged(job: Job, **changes: Any) -> dict[str, Any]:
    return {name: getattr(job, name) for name in JOB_WRITABLE} | changes


def test_only_fields_whose_value_differs_are_changes() -> None:
    job = _job()
    assert changed_fields(job, _merged(job)) == {}
    assert changed_fields(job, _merged(job, timeout_s=30, payload=dict(job.payload))) == {}  # 30 == 30.0
    assert changed_fields(job, _merged(job, timezone="Asia/Kolkata", name="hook")) == {"timezone": "Asia/Kolkata"}


def test_a_status_change_alone_is_a_pause_or_a_resume() -> None:
    assert kind_of({"status": "paused"}) == "paused"
    assert kind_of({"status": "active"}) == "resumed"
    assert kind_of({"status": "paused", "cron_expression": "@daily"}) == "updated"
    assert kind_of({"jitter_s": 1.0}) == "updated"


def test_a_revision_shows_no_secret() -> None:
    job = _job()
    values = shown("http", {"payload": job.payload, "name": "x"})
    assert values == {"payload": {"url": "https://example.com/a", "headers": {"Authorization": "***"}}, "name": "x"}
    assert job.payload["headers"]["Authorization"] == "Bearer s3cret", "the job itself is left as it is"
