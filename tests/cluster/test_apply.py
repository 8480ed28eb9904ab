"""`cronos apply` as a real process against a real API (issue 15, item 5): plan, apply, idempotence,
secrets, --prune, refusals, and the jobs-file schema the API publishes."""

from __future__ import annotations

import json
import resource
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import jsonschema
import pytest
import yaml

from tests.cluster.cli_api import CRONOS, api_process, clean_env, cli, get, ok, one_line_error
from tests.unit.test_apply import BOMB

pytestmark = pytest.mark.cluster

JOBS = """\
# yaml-language-server: $schema=http://localhost:3002/api/jobs-file.schema.json
jobs:
  - name: reindex
    cron_expression: "0 0 1 1 *"
    payload: {action: reindex, target: users}
  - name: hook
    kind: http
    cron_expression: "0 0 1 1 *"
    timeout_s: 30
    payload:
      url: https://hooks.example.com/cronos
      headers: {Authorization: "Bearer ${CRONOS_APPLY_HOOK_TOKEN}", X-Team: ops}
  - name: cleanup
    cron_expression: "@yearly"
    status: paused
    payload: {action: cleanup}
"""


def _audit(url: str) -> dict[str, int]:
    """How many audited writes each job has had: every API write of a job leaves one entry."""
    return {job["name"]: len(get(url, f"/api/jobs/{job['id']}/history")["items"]) for job in _jobs(url).values()}


def _jobs(url: str) -> dict[str, dict[str, Any]]:
    return {job["name"]: job for job in get(url, "/api/jobs?limit=500")["items"]}


async def _stored_header(database_url: str, name: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        value = await conn.fetchval("SELECT payload->'headers'->>'Authorization' FROM jobs WHERE name = $1", name)
    finally:
        await conn.close()
    return str(value)


async def test_apply_plans_creates_then_has_nothing_to_change(
    tmp_path: Path, database_url: str, key_prefix: str
) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    with api_process(tmp_path, database_url, key_prefix) as url:

        def apply(*args: str, token: str = "s3cret-1") -> str:
            return ok(cli(tmp_path, url, "apply", "-f", str(jobs), *args, CRONOS_APPLY_HOOK_TOKEN=token))

        lines = apply("--dry-run").splitlines()
        planned = [line for line in lines if not line.startswith(" ")]  # the plan, without the schedule notes
        assert any(line.strip().endswith("at 00:00 on day 1 of the month in January") for line in lines), lines
        assert planned == ["create     reindex", "create     hook", "create     cleanup (paused)",
                           "Plan (dry run, nothing changed): 3 to create."]  # fmt: skip
        assert _jobs(url) == {}

        applied = apply()
        assert "Applied: 3 to create." in applied
        assert "webhook signing secret of 'hook' (shown this once): whsec_" in applied
        made = _jobs(url)
        assert made["cleanup"]["status"] == "paused" and made["hook"]["timeout_s"] == 30.0
        assert made["hook"]["payload"]["headers"] == {"Authorization": "***", "X-Team": "ops"}
        assert made["reindex"]["managed_by"] == {"tool": "cronos-apply", "secrets_digest": None}
        assert made["hook"]["managed_by"]["secrets_digest"].startswith("scrypt$")
        assert "s3cret-1" not in str(made)
        assert await _stored_header(database_url, "hook") == "Bearer s3cret-1"

        writes = _audit(url)
        again = apply()
        assert again.splitlines()[-1] == "Nothing to change: 3 job(s) match the file(s)."
        assert all(line.startswith("unchanged") for line in again.splitlines()[:-1])
        assert _audit(url) == writes and _jobs(url) == made  # no write at all: updated_at is the same too

        rotated = apply(token="s3cret-2")  # only the secret changed: the digest sees it
        assert "update     hook: payload (secrets)" in rotated
        assert await _stored_header(database_url, "hook") == "Bearer s3cret-2"
        assert apply(token="s3cret-2").splitlines()[-1].startswith("Nothing to change")

        # Another write of the payload drops the digest: the next apply puts the file's secret back.
        headers = {"Authorization": "Bearer by-hand", "X-Team": "ops"}  # looks the same through the API
        by_hand = {"url": "https://hooks.example.com/cronos", "headers": headers}
        ok(cli(tmp_path, url, "jobs", "update", "hook", "--payload", json.dumps(by_hand)))
        assert _jobs(url)["hook"]["managed_by"] == {"tool": "cronos-apply", "secrets_digest": None}
        assert "update     hook: payload (secrets)" in apply(token="s3cret-2")
        assert await _stored_header(database_url, "hook") == "Bearer s3cret-2"

        # The schema `cronos apply` validated against is public, a JSON Schema, and fits the file.
        schema = get(url, "/api/jobs-file.schema.json")
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.validate(yaml.safe_load(JOBS), schema)


async def test_apply_updates_pauses_resumes_and_prunes_only_its_own_jobs(
    tmp_path: Path, database_url: str, key_prefix: str
) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "a.yaml").write_text(JOBS)
    (folder / "b.yml").write_text("jobs:\n  - {name: extra, cron_expression: '@yearly', payload: {action: x}}\n")
    with api_process(tmp_path, database_url, key_prefix) as url:

        def run(*args: str) -> str:
            return ok(cli(tmp_path, url, *args, CRONOS_APPLY_HOOK_TOKEN="t"))

        assert "Applied: 4 to create." in run("apply", "-f", str(folder))
        run("jobs", "create", "--name", "by-hand", "--cron-expression", "@yearly", "--payload", '{"action": "x"}')
        run("jobs", "update", "reindex", "--max-retries", "3")  # drift the file will undo

        (folder / "b.yml").unlink()
        edited = JOBS.replace("status: paused", "status: active").replace("timeout_s: 30", "timeout_s: 45")
        (folder / "a.yaml").write_text(edited.replace("target: users", "target: orders"))
        planned = run("apply", "-f", str(folder), "--dry-run")
        assert "update     reindex: max_retries, payload" in planned
        assert "update     hook: timeout_s" in planned and "resume     cleanup" in planned
        assert "kept       extra: not in the file(s); --prune deletes it" in planned
        assert "by-hand" not in planned  # not apply's: neither pruned nor reported

        pruned = run("apply", "-f", str(folder), "--prune")
        assert "delete     extra" in pruned and "Applied: 2 to update, 1 to resume, 1 to delete." in pruned
        jobs = _jobs(url)
        assert set(jobs) == {"reindex", "hook", "cleanup", "by-hand"}
        assert jobs["reindex"]["max_retries"] == 0 and jobs["reindex"]["payload"]["target"] == "orders"
        assert jobs["cleanup"]["status"] == "active" and jobs["hook"]["timeout_s"] == 45.0
        assert jobs["by-hand"]["managed_by"] is None
        assert run("apply", "-f", str(folder), "--prune").splitlines()[-1].startswith("Nothing to change")


def test_apply_refusals_name_the_file_the_job_and_the_field(tmp_path: Path, database_url: str, key_prefix: str) -> None:
    bad = tmp_path / "bad.yaml"
    with api_process(tmp_path, database_url, key_prefix) as url:

        def refused(text: str, *words: str) -> None:
            bad.write_text(text)
            line = one_line_error(cli(tmp_path, url, "apply", "-f", str(bad)), str(bad), *words)
            assert "Traceback" not in line

        job = "jobs:\n  - {name: ok, cron_expression: '@yearly', payload: {action: x}}\n"
        refused(job + "  - {name: late, cron_expression: '0 24 * * *', payload: {action: x}}\n",
                "job 'late'", "$.cron_expression", "hour")  # fmt: skip
        secret = "headers: {Authorization: 'Bearer ${CRONOS_APPLY_UNSET}'}"
        http = (
            f"  - {{name: h, kind: http, cron_expression: '@yearly', payload: {{url: 'https://x.test', {secret}}}}}\n"
        )
        refused(job + http, "job 'h'", "$.payload.headers.Authorization", "${CRONOS_APPLY_UNSET} is not set")
        assert _jobs(url) == {}  # nothing is written before every job validated

        # What only the server knows (its SSRF guard) is refused when the job is written.
        refused(job + "  - {name: inner, kind: http, cron_expression: '@yearly', payload: {url: 'http://10.1.2.3/'}}\n",
                "job 'inner'", "create refused", "422", "$.payload.url")  # fmt: skip
        assert set(_jobs(url)) == {"ok"}  # what came before stays; applying again finishes
        one_line_error(cli(tmp_path, url, "apply", "-f", str(tmp_path / "none.yaml")), "no such file or folder")
    one_line_error(cli(tmp_path, url, "apply", "-f", str(bad), "--dry-run"), "cannot reach the API")


def test_apply_reads_only_its_own_variables_and_refuses_an_alias_bomb(
    tmp_path: Path, database_url: str, key_prefix: str
) -> None:
    """Issue 36: a file copied the runner's API token into a job any read token sees, and a
    510-byte alias bomb took `apply --dry-run` to 2.75 GB and a traceback."""
    bad = tmp_path / "bad.yaml"
    runner = "runner-token-" + "r" * 40
    with api_process(tmp_path, database_url, key_prefix) as url:
        for header, words in (
            ("Bearer ${CRONOS_API_TOKEN}", ("${CRONOS_API_TOKEN}", "only variables named CRONOS_APPLY_*")),
            ("${CRONOS_APPLY_T}", ("$.payload.headers.X-Team", "only where the API keeps the value secret")),
        ):
            name = "Authorization" if "API_TOKEN" in header else "X-Team"
            bad.write_text(
                "jobs:\n  - {name: leak, kind: http, cron_expression: '@yearly', "
                f"payload: {{url: 'https://x.test', headers: {{{name}: '{header}'}}}}}}\n"
            )
            done = cli(tmp_path, url, "apply", "-f", str(bad), token=runner, CRONOS_APPLY_T=runner)
            line = one_line_error(done, str(bad), "job 'leak'", *words)
            assert runner not in done.stdout + done.stderr, line
        assert _jobs(url) == {}

        bad.write_text(BOMB)
        done = subprocess.run(  # capped at 1 GiB of address space: a regression fails, it cannot take the box
            [CRONOS, "apply", "-f", str(bad), "--dry-run"], cwd=tmp_path, env=clean_env(CRONOS_API_URL=url),
            capture_output=True, text=True, timeout=120, preexec_fn=_address_space(2**30),
        )  # fmt: skip
        one_line_error(done, str(bad), "YAML aliases expand")


def test_a_dry_run_reports_every_refusal_the_apply_would_meet(
    tmp_path: Path, database_url: str, key_prefix: str
) -> None:
    """Issue 37: `--dry-run` said "4 to create" for a file the apply then refused (422: $.kind: shell
    jobs need the cluster to allow them). The API checks each create and update, then rolls it back."""
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n"
        "  - {name: ok, cron_expression: '@yearly', payload: {action: x}}\n"
        "  - {name: sh, kind: shell, cron_expression: '@yearly', payload: {argv: ['true']}}\n"
        "  - {name: inner, kind: http, cron_expression: '@yearly', payload: {url: 'http://10.1.2.3/'}}\n"
        "  - {name: grouped, cron_expression: '@yearly', concurrency_group: new, payload: {action: x}}\n"
        "concurrency_groups: {new: 1}\n"
    )
    with api_process(tmp_path, database_url, key_prefix) as url:  # shell not allowed
        done = cli(tmp_path, url, "apply", "-f", str(jobs), "--dry-run")
        one_line_error(done, "dry run: 2 change(s) of the plan would be refused")
        lines = done.stdout.splitlines()
        shell = "would be refused: 422: $.kind: shell jobs need the cluster to allow them"
        assert shell in lines[lines.index("create     sh") + 1], lines
        assert "would be refused: 422: $.payload.url" in lines[lines.index("create     inner") + 1], lines
        assert "would be refused" not in "".join(lines[lines.index("create     grouped") :]), lines
        assert _jobs(url) == {} and get(url, "/api/concurrency-groups")["items"] == []  # nothing written
        applied = cli(tmp_path, url, "apply", "-f", str(jobs))
        one_line_error(applied, "job 'sh': create refused: 422: $.kind: shell jobs need the cluster to allow them")


def _address_space(limit: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


SHARED = """\
concurrency_groups:
  warehouse: 2
calendars:
  holidays:
    timezone: Europe/Paris
    dates: [2026-12-25, 2027-01-01]
    weekdays: [sat, sun]
jobs:
  - name: load-orders
    cron_expression: "0 3 * * *"
    concurrency_group: warehouse
    calendars: [{name: holidays}]
    payload: {action: load}
"""


async def test_apply_declares_the_groups_and_calendars_its_jobs_name(
    tmp_path: Path, database_url: str, key_prefix: str
) -> None:
    jobs = tmp_path / "shared.yaml"
    jobs.write_text(SHARED)
    with api_process(tmp_path, database_url, key_prefix) as url:
        planned = ok(cli(tmp_path, url, "apply", "-f", str(jobs), "--dry-run")).splitlines()
        assert planned[:2] == [
            "create     concurrency group warehouse: limit 2",
            "create     calendar holidays: 2 dates, 0 ranges, 2 weekdays in Europe/Paris",
        ], planned
        assert get(url, "/api/calendars")["items"] == []  # a dry run writes nothing
        ok(cli(tmp_path, url, "apply", "-f", str(jobs)))
        (calendar,) = get(url, "/api/calendars")["items"]
        assert calendar["dates"] == ["2026-12-25", "2027-01-01"] and calendar["timezone"] == "Europe/Paris"
        job = _jobs(url)["load-orders"]
        assert job["concurrency_group"] == "warehouse" and job["calendars"][0]["name"] == "holidays"
        again = ok(cli(tmp_path, url, "apply", "-f", str(jobs))).splitlines()
        assert "unchanged  calendar holidays: 2 dates, 0 ranges, 2 weekdays in Europe/Paris" in again, again
        jobs.write_text(SHARED.replace("[sat, sun]", "[sun]"))
        changed = ok(cli(tmp_path, url, "apply", "-f", str(jobs))).splitlines()
        assert "update     calendar holidays: 2 dates, 0 ranges, 1 weekdays in Europe/Paris" in changed, changed
        assert get(url, "/api/calendars")["items"][0]["weekdays"] == ["sun"]
