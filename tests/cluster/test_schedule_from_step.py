"""`n/step` on a real `cronos dev` (issue 40, item 3): a job created through the API with `3/5` in its
seconds field runs at seconds 3, 8, 13, … (`3-59/5`), watched only through the runs it makes; the
CLI that creates one says what the step means."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cli_api import api_process, cli, get, ok, post
from tests.services import Services
from tests.waiting import block_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]


def test_a_job_with_n_step_runs_from_n_by_step(
    tmp_path: Path, services: Services, database_url: str, key_prefix: str
) -> None:
    dev = ("dev", "--import", "tests.cluster.tasks")
    with api_process(tmp_path, database_url, key_prefix, *dev, REDIS_URL=services.redis_url) as url:
        job = post(url, "/api/jobs", {"name": "from-step", "cron_expression": "3/5 * * * * *",
                                        "payload": {"action": "noop"}})  # fmt: skip
        assert "step_from" in [w["code"] for w in job["warnings"]]

        def completed() -> list[Any]:
            page = get(url, f"/api/jobs/{job['id']}/runs?state=completed")
            runs = [r for r in page["items"] if r["trigger"] == "schedule"]
            return runs if len(runs) >= 3 else []

        runs = block_until(completed, timeout=60, what="three scheduled runs of 3/5")
        seconds = {int(r["scheduled_for"][17:19]) for r in runs}
        assert seconds <= set(range(3, 60, 5)), seconds

        made = cli(tmp_path, url, "jobs", "create", "--name", "from-step-cli", "--cron-expression", "0 0/15 * * *",
                   "--payload", '{"action": "noop"}')  # fmt: skip
        ok(made)
        assert "means `0-23/15`: hour 0, 15" in made.stderr, made.stderr
