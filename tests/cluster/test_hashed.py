"""`H` on a real `cronos dev` (issue 40, item 2): a job created through the API alone, written
`H/5 * * * * *`, runs every 5 s at the second its name picks, and still does after the whole
cluster restarts (nothing about the value is held in memory or stored but the name)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from cronos.cron_fields import SECOND
from cronos.hashed import offset
from tests.cluster.cli_api import api_process, get, post
from tests.services import Services
from tests.waiting import block_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

NAME = "nightly-export"  # offset 3 of 5 (cronos.hashed.offset)


def _runs_after(url: str, job_id: int, after: datetime, count: int) -> list[datetime]:
    def enough() -> list[datetime]:
        page = get(url, f"/api/jobs/{job_id}/runs?state=completed&limit=200")
        times = [datetime.fromisoformat(r["scheduled_for"]) for r in page["items"] if r["trigger"] == "schedule"]
        later = [t for t in times if t > after]
        return later if len(later) >= count else []

    return block_until(enough, timeout=60, what=f"{count} scheduled runs after {after}")


def test_h_runs_at_the_second_the_name_picks_across_a_restart(
    tmp_path: Path, services: Services, database_url: str, key_prefix: str
) -> None:
    assert offset(NAME, SECOND, 5) == 3
    dev = ("dev", "--import", "tests.cluster.tasks")
    with api_process(tmp_path, database_url, key_prefix, *dev, REDIS_URL=services.redis_url) as url:
        job = post(url, "/api/jobs", {"name": NAME, "cron_expression": "H/5 * * * * *", "payload": {"action": "noop"}})
        assert job["cron_expression"] == "H/5 * * * * *"
        first = _runs_after(url, job["id"], datetime.fromisoformat(job["created_at"]), 3)
        assert {t.second % 5 for t in first} == {3}, first
    stopped = max(first)
    with api_process(tmp_path, database_url, key_prefix, *dev, REDIS_URL=services.redis_url) as url:
        again = _runs_after(url, job["id"], stopped, 3)
        assert {t.second % 5 for t in again} == {3}, again  # the same second after the restart
