from __future__ import annotations

import logging
from datetime import UTC, datetime

import cronos
from cronos import example_tasks
from cronos.tasks import call, lookup


async def test_seed_reindex_task_is_registered_and_reports_its_target() -> None:
    fn = lookup("reindex")
    assert fn is example_tasks.reindex
    when = datetime(2026, 1, 1, tzinfo=UTC)
    ctx = cronos.RunContext(job_id=4, run_id=9, scheduled_for=when, attempt=2, logger=logging.getLogger("t"))
    result = await call(fn, {"action": "reindex", "target": "users", "seconds": 0}, ctx)
    assert result == {"target": "users", "idempotency_key": f"4:{when.isoformat()}", "attempt": 2}
