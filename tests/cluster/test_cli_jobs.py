"""`cronos jobs ...` and `cronos runs ...` as real processes against a real API (issue 15, item 4)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cli_api import CRONOS, api_process, as_json, clean_env, cli, ok, one_line_error
from tests.waiting import block_until

pytestmark = pytest.mark.cluster

YEARLY = "0 0 1 1 *"  # never due during a test: only manual triggers run


def test_jobs_and_runs_commands_drive_a_live_cluster(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    dev = ("dev", "--import", "tests.cluster.cli_tasks")
    with api_process(tmp_path, database_url, key_prefix, *dev) as url:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return cli(tmp_path, url, *args)

        payload = '{"action": "cli.fail", "disk": "sda"}'
        create = ("jobs", "create", "--name", "disk-check", "--cron-expression", YEARLY, "--payload", payload)
        created = ok(run(*create, "--timezone", "Europe/Paris"))
        assert "disk-check" in created and "Europe/Paris" in created

        header, row = ok(run("jobs", "list")).strip().splitlines()
        assert header.split() == ["ID", "NAME", "SCHEDULE", "TIMEZONE", "KIND", "STATUS", "NEXT", "RUN"]
        assert row.split()[:2] == ["1", "disk-check"] and "active" in row
        listed = as_json(run("jobs", "list", "--json"))
        assert [job["name"] for job in listed] == ["disk-check"]

        changed = as_json(run("jobs", "update", "disk-check", "--timeout-s", "30", "--max-retries", "1", "--json"))
        assert (changed["timeout_s"], changed["max_retries"]) == (30.0, 1)
        watched = '{"start_within_s": 60}'
        assert as_json(run("jobs", "update", "1", "--expectations", watched, "--json"))["expectations"] is not None
        cleared = as_json(run("jobs", "update", "1", "--expectations", "null", "--json"))
        assert cleared["expectations"] is None and cleared["timeout_s"] == 30.0  # only what was named changes
        assert as_json(run("jobs", "pause", "disk-check", "--json"))["status"] == "paused"
        assert as_json(run("jobs", "list", "--status", "active", "--json")) == []
        assert "is active" in ok(run("jobs", "resume", "1"))

        queued = as_json(run("jobs", "trigger", "disk-check", "--json"))
        assert queued["state"] == "queued" and queued["trigger"] == "manual"

        def failed() -> dict[str, Any] | None:
            runs = as_json(run("runs", "list", "disk-check", "--json"))
            return next((r for r in runs if r["id"] == queued["id"] and r["state"] == "failed"), None)

        block_until(failed, timeout=60, interval=0.5, what="the triggered run to fail")
        shown = ok(run("runs", "get", str(queued["id"])))
        assert "RuntimeError: disk sda is full" in shown and "traceback:" in shown
        assert re.search(r"^duration_ms +\d+\.\dms *$", shown, re.MULTILINE), shown  # not 0.32405000001745066
        table = ok(run("runs", "list", "1")).splitlines()
        assert table[0].split()[:4] == ["ID", "SCHEDULED", "FOR", "ATTEMPT"]
        assert any("manual" in line and "failed" in line and "disk sda is full" in line for line in table[1:])
        assert "retry" in table[1]  # max_retries 1: the second attempt, newest first

        assert "Deleted job disk-check" in ok(run("jobs", "delete", "disk-check"))
        one_line_error(run("jobs", "get", "disk-check"), "no job named 'disk-check'")


def test_failures_are_one_line_with_the_problem_detail(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    with api_process(tmp_path, database_url, key_prefix) as url:

        def run(*args: str, token: str = "") -> subprocess.CompletedProcess[str]:
            return cli(tmp_path, url, *args, token=token)

        base = ("jobs", "create", "--name", "a", "--payload", '{"action": "x"}')
        one_line_error(run(*base, "--cron-expression", "0 25 * * *"), "422", "$.cron_expression", "hour")
        one_line_error(run(*base, "--cron-expression", YEARLY, "--timezone", "Mars/Base"), "422", "$.timezone")
        one_line_error(run(*base, "--every", "0s"), "422", "$.every", "at least 1 s")  # an interval (issue 25)
        ok(run(*base, "--cron-expression", YEARLY))
        one_line_error(run(*base, "--cron-expression", YEARLY), "409", "already exists")
        one_line_error(run("jobs", "get", "42"), "404", "job 42 not found")
        one_line_error(run("runs", "get", "42"), "404", "run 42 not found")
        one_line_error(run("jobs", "update", "a"), "nothing to change")
        one_line_error(run("jobs", "update", "a", "--timeout-s", "soon"), "--timeout-s", "not a number")
        one_line_error(run("jobs", "create", "--name", "b"), "required")

        # Once a token exists the API wants it; the CLI sends CRONOS_API_TOKEN.
        made = subprocess.run(
            [CRONOS, "token", "create", "--name", "ops", "--scope", "write"], cwd=tmp_path,
            env=clean_env(DATABASE_URL=database_url), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        token = ok(made).strip().splitlines()[-1]
        one_line_error(run("jobs", "list"), "401")
        assert [job["name"] for job in as_json(run("jobs", "list", "--json", token=token))] == ["a"]
        refused = one_line_error(run("jobs", "list", token="cronos_" + "x" * 40), "401")
        assert "x" * 40 not in refused  # a token is never echoed
    down = cli(tmp_path, url, "jobs", "list")  # the API is gone now
    one_line_error(down, "cannot reach the API at", url)
    assert "Traceback" not in down.stderr
