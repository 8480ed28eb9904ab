"""`cronos jobs trigger JOB --set/--payload/--at` as real processes against `cronos dev` (issue 24, item 5)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.cluster.cli_api import api_process, as_json, cli, ok, one_line_error
from tests.waiting import block_until

pytestmark = pytest.mark.cluster


def test_trigger_with_inputs_and_a_past_ticks_date(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    dev = ("dev", "--import", "tests.cluster.cli_tasks")
    with api_process(tmp_path, database_url, key_prefix, *dev) as url:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return cli(tmp_path, url, *args)

        payload = '{"action": "cli.echo", "target": "users", "opts": {"full": false, "batch": 10}}'
        job = as_json(run("jobs", "create", "--name", "echo", "--cron-expression", "* * * * * *", "--status",
                          "paused", "--payload", payload, "--json"))  # fmt: skip
        tick = datetime.fromisoformat(job["created_at"]).replace(microsecond=0) + timedelta(seconds=1)
        block_until(lambda: datetime.now(UTC) > tick + timedelta(milliseconds=50), what="a tick to pass")

        shown = ok(run("jobs", "trigger", "echo", "--set", "target=orders", "--set", "opts.full=true",
                       "--at", tick.isoformat().replace("+00:00", "Z")))  # fmt: skip
        assert "Queued run" in shown and "attempt 1" in shown and '"target":"orders"' in shown
        run_id = int(shown.split()[2])

        def done() -> dict[str, Any] | None:
            found = as_json(run("runs", "get", str(run_id), "--json"))
            return found if found["state"] == "completed" else None

        ended = block_until(done, timeout=60, interval=0.3, what="the triggered run to complete")
        assert ended["inputs"] == {"target": "orders", "opts": {"full": True}}
        result = msgspec.json.decode(ended["result"])
        assert result["payload"] == {"action": "cli.echo", "target": "orders", "opts": {"full": True, "batch": 10}}
        assert result["key"] == f"{job['id']}:{tick.isoformat()}" and result["attempt"] == 1
        assert "inputs" in ok(run("runs", "get", str(run_id)))

        one_line_error(run("jobs", "trigger", "echo", "--set", "novalue"), "KEY=VALUE")
        one_line_error(run("jobs", "trigger", "echo", "--payload", "[1]"), "JSON object")
        one_line_error(run("jobs", "trigger", "echo", "--at", "2026-01-01T00:00:00"), "offset")
        one_line_error(run("jobs", "trigger", "echo", "--payload", '{"opts": 1}', "--set", "opts.x=1"),
                       "opts is not an object")  # fmt: skip
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        one_line_error(run("jobs", "trigger", "echo", "--at", later), "422", "$.scheduled_for", "past tick")
        one_line_error(run("jobs", "trigger", "echo", "--set", "api_key=x"), "422", "$.payload.api_key", "secret")
        assert as_json(run("jobs", "trigger", "echo", "--json"))["attempt"] == 1  # no option: a plain run now
