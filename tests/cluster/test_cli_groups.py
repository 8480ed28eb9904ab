"""`cronos groups ...` and a job's `--concurrency-group` as real processes against a real API: each
refusal is a non-zero exit and one line naming what is wrong."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cluster.cli_api import api_process, as_json, cli, ok, one_line_error

pytestmark = pytest.mark.cluster


def test_groups_commands_and_their_refusals(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    with api_process(tmp_path, database_url, key_prefix) as url:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return cli(tmp_path, url, *args)

        one_line_error(run("groups", "set", "warehouse", "--limit", "0"), "--limit", "is not a limit")
        one_line_error(run("groups", "get", "warehouse"), "404", "warehouse")
        job = ("jobs", "create", "--name", "load", "--cron-expression", "@yearly", "--payload", '{"action": "x"}')
        one_line_error(run(*job, "--concurrency-group", "warehouse"), "422", "$.concurrency_group", "warehouse")

        assert "limit 2" in ok(run("groups", "set", "warehouse", "--limit", "2"))
        assert as_json(run(*job, "--concurrency-group", "warehouse", "--json"))["concurrency_group"] == "warehouse"
        header, row = ok(run("groups", "list")).strip().splitlines()
        assert header.split() == ["NAME", "LIMIT", "HOLDING", "WAITING", "JOBS"] and row.split() == [
            "warehouse", "2", "0", "0", "1"
        ]  # fmt: skip
        assert [j["name"] for j in as_json(run("groups", "get", "warehouse", "--json"))["members"]] == ["load"]
        one_line_error(run("groups", "delete", "warehouse"), "409", "named by jobs")
