"""`cronos runs logs RUN [-f]` as real processes against `cronos dev` (issue 39): -f prints a
running run's lines as they come and exits once the run ended; without it, the whole output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cluster.cli_api import CRONOS, api_process, as_json, clean_env, cli, ok, one_line_error

pytestmark = pytest.mark.cluster


def test_logs_follow_a_running_run_to_its_end(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    gate = tmp_path / "gate"
    dev = ("dev", "--import", "tests.cluster.output_tasks")
    with api_process(tmp_path, database_url, key_prefix, *dev) as url:
        payload = f'{{"action": "out.gated", "gate": "{gate}"}}'
        job = as_json(cli(tmp_path, url, "jobs", "create", "--name", "gated", "--cron-expression", "@yearly",
                          "--status", "paused", "--payload", payload, "--json"))  # fmt: skip
        run = as_json(cli(tmp_path, url, "jobs", "trigger", str(job["id"]), "--json"))
        follow = subprocess.Popen(
            [CRONOS, "runs", "logs", str(run["id"]), "-f"], cwd=tmp_path, env=clean_env(CRONOS_API_URL=url),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert follow.stdout is not None
            assert follow.stdout.readline() == "first line\n"  # while the run waits for the gate
            assert follow.stdout.readline() == "WARNING cronos.task.out.gated: waiting for the reader\n"
            assert follow.poll() is None  # still following: the run has not ended
            gate.touch()
            out, err = follow.communicate(timeout=60)
        finally:
            follow.kill()
        assert (follow.returncode, out, err) == (0, "last line\n", "")
        whole = ok(cli(tmp_path, url, "runs", "logs", str(run["id"])))
        assert whole == "first line\nWARNING cronos.task.out.gated: waiting for the reader\nlast line\n"
        lines = ok(cli(tmp_path, url, "runs", "logs", str(run["id"]), "--offset", "2", "--json")).splitlines()
        assert len(lines) == 1 and '"seq":2' in lines[0] and '"line":"last line"' in lines[0]
        one_line_error(cli(tmp_path, url, "runs", "logs", "999999"), "404", "run 999999 not found")
