"""Every end the executor reports of a run holding a concurrency group's slot frees it: the
finish releases only runs whose outcome says `holds_slot` (cronos.store.finishes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronos.store.claims import ClaimedRun
from executor import kinds
from executor.running import InFlight, outcome_of

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def flight(group: str | None) -> InFlight:
    run = ClaimedRun(
        id=1, job_id=1, scheduled_for=NOW, attempt=1, trigger="schedule", epoch=1, started_at=NOW, due_at=NOW,
        exclusive=False, name="j", kind="task", payload={}, timeout_s=10, max_retries=0, retry_backoff_s=1,
        concurrency_policy="allow", webhook_secret="s", concurrency_group=group,
    )  # fmt: skip
    return InFlight(run, "lock", ("default", "1-0"))


@pytest.mark.parametrize(
    ("cancel_by", "failure", "state"),
    [(None, None, "completed"), (None, kinds.RunFailed("boom"), "failed"), ("ops", None, "cancelled")],
)
@pytest.mark.parametrize("group", [None, "warehouse"])
def test_every_end_of_a_slot_holder_frees_its_slot(
    cancel_by: str | None, failure: BaseException | None, state: str, group: str | None
) -> None:
    f = flight(group)
    f.cancel_by = cancel_by
    outcome = outcome_of(f, "node", None if failure else "ok", failure, 5.0)
    assert outcome.state == state
    assert outcome.holds_slot is (group is not None)
