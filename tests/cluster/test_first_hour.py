"""A newcomer's first hour (issue 23): `cronos import crontab` output applied to a real cluster and
run there, and `cronos dev --import myapp.tasks` finding `myapp` in the folder it runs from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cli_api import api_process, as_json, cli, get, ok, one_line_error
from tests.waiting import block_until

pytestmark = pytest.mark.cluster

CRONTAB = """\
# m h dom mon dow command
MAILTO=ops@example.com
GREETING = 'hello from cron'
0 0 1 1 * echo "$GREETING in $$HOME" > {out}/greeting.txt
CRON_TZ=Europe/Paris
@yearly /bin/true --quiet
@reboot /usr/local/bin/warm-cache
"""

TASKS = """\
import cronos


@cronos.task("hello")
def hello(payload, ctx):
    return {"greeting": f"hello {payload['who']}"}
"""


def _ended(url: str, cwd: Path, job: str, run_id: int) -> dict[str, Any] | None:
    runs = as_json(cli(cwd, url, "runs", "list", job, "--json"))
    return next((r for r in runs if r["id"] == run_id and r["state"] in ("completed", "failed")), None)


def test_an_imported_crontab_is_accepted_by_apply_and_runs(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "crontab").write_text(CRONTAB.format(out=out))
    with api_process(tmp_path, database_url, key_prefix, "dev", CRONOS_ALLOW_SHELL="true") as url:
        converted = cli(tmp_path, url, "import", "crontab", "crontab")
        assert converted.returncode == 0, converted.stderr
        assert converted.stderr.strip().splitlines() == [
            "cronos: crontab: line 7: @reboot is left out (see the comment in the output)"
        ]
        (tmp_path / "jobs.yaml").write_text(converted.stdout)

        lines = ok(cli(tmp_path, url, "apply", "-f", "jobs.yaml", "--dry-run")).splitlines()
        planned = [line for line in lines if not line.startswith(" ")]  # without the schedule notes
        assert [line.split()[0] for line in planned] == ["create", "create", "Plan"], lines
        assert planned[-1] == "Plan (dry run, nothing changed): 2 to create."
        assert get(url, "/api/jobs")["items"] == []

        assert "Applied: 2 to create." in ok(cli(tmp_path, url, "apply", "-f", "jobs.yaml"))
        echo, true = get(url, "/api/jobs")["items"]
        assert (echo["kind"], echo["timezone"]) == ("shell", "UTC")
        assert echo["payload"]["env"] == {"GREETING": "hello from cron"}
        assert (true["timezone"], true["payload"]["argv"]) == ("Europe/Paris", ["/bin/true", "--quiet"])
        again = ok(cli(tmp_path, url, "apply", "-f", "jobs.yaml")).splitlines()
        assert again[-1] == "Nothing to change: 2 job(s) match the file(s)."

        # It runs as cron runs it: in sh, with the crontab's variable, and `$$` reaching sh (its pid)
        # where apply would have made it `$` (then sh would print $HOME) had the import not escaped it.
        queued = as_json(cli(tmp_path, url, "jobs", "trigger", echo["name"], "--json"))
        run = block_until(lambda: _ended(url, tmp_path, echo["name"], queued["id"]), timeout=60, interval=0.3)
        assert run["state"] == "completed", ok(cli(tmp_path, url, "runs", "get", str(run["id"])))
        assert re.fullmatch(r"hello from cron in [0-9]+HOME\n", (out / "greeting.txt").read_text())


def test_bad_crontab_line_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "crontab").write_text("@daily /bin/true\n61 * * * * /bin/true\n")
    one_line_error(cli(tmp_path, "http://127.0.0.1:9", "import", "crontab", "crontab"), "crontab: line 2", "minute")


def test_dev_imports_the_users_tasks_from_its_folder(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp/__init__.py").write_text("")
    (tmp_path / "myapp/tasks.py").write_text(TASKS)
    with api_process(tmp_path, database_url, key_prefix, "dev", "--import", "myapp.tasks") as url:
        made = as_json(cli(tmp_path, url, "jobs", "create", "--name", "greet", "--cron-expression", "0 0 1 1 *",
                           "--payload", '{"action": "hello", "who": "newcomer"}', "--json"))  # fmt: skip
        queued = as_json(cli(tmp_path, url, "jobs", "trigger", str(made["id"]), "--json"))
        run = block_until(lambda: _ended(url, tmp_path, "greet", queued["id"]), timeout=60, interval=0.3)
        assert run["state"] == "completed", run
        shown = ok(cli(tmp_path, url, "runs", "get", str(run["id"])))
        assert "hello newcomer" in shown, shown
