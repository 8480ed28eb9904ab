"""Every command on every page is run, or the page says why not (issue 23, item 1).

Each ```sh / ```console block of README.md and docs/**/*.md is either preceded by
`<!-- not run: why -->` or run here: per page, a real `cronos dev` (API, dispatcher and executor as
one process, with the example tasks and any task module the page writes) on a database and key
prefix of its own, then the page's blocks in order as bash scripts (`set -e`) in a folder holding
the files the page asks the reader to write (`<!-- file: PATH -->`). A new command on a page is
thus run by the next test run, or fails the test until it is excused. What the reader would type
is changed only where it must be: `localhost:3002` becomes the test cluster's port, `.venv/bin/`
the test's own virtualenv, and curl fails on an HTTP error (`--fail-with-body`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from cronos.traces import run_span_ids, traceparent
from tests.cluster.cli_api import clean_env
from tests.cluster.servers import free_port
from tests.docs.blocks import REPO, Block, blocks, command_blocks, markers, pages
from tests.services import Services
from tests.serving import serving
from tests.waiting import block_until

pytestmark = pytest.mark.cluster

BIN = Path(sys.executable).parent
CURL = shutil.which("curl")


def _runnable(page: Path) -> list[Block]:
    return [block for block in command_blocks(page) if block.not_run is None]


RUN_PAGES = [page for page in pages() if _runnable(page)]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _ran(url: str, job_id: int, *, trigger: str = "manual") -> dict[str, Any] | None:
    """The job's run of that trigger once it completed (the task really ran on the executor)."""
    runs = _get(f"{url}/api/jobs/{job_id}/runs")["items"]
    return next((run for run in runs if run["trigger"] == trigger and run["state"] == "completed"), None)


def _seed_job_ran(url: str) -> None:
    block_until(lambda: _ran(url, 1), timeout=30, interval=0.1, what="the triggered reindex run to complete")


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as resp:
        return json.loads(resp.read())


def _readme_told(url: str) -> None:
    """The README's channel (`--after-failures 2`, failed and recovered) really hears the seed job:
    two runs failing in a row (a payload the example task cannot read), then a success. Slack is
    out of reach here: the notification is due (or given up), not suppressed, which is the point."""
    _seed_job_ran(url)
    for inputs in ({"seconds": "not a number"}, {"seconds": "not a number"}, {}):
        run = _post(f"{url}/api/jobs/1/trigger", {"payload": inputs})
        block_until(lambda r=run: _get(f"{url}/api/runs/{r['id']}")["state"] in ("failed", "completed"), timeout=30,
                    interval=0.1, what="a triggered run to end")  # fmt: skip
    channel = next(c for c in _get(f"{url}/api/channels")["items"] if c["name"] == "ops-slack")

    def told() -> list[tuple[str, str]] | None:
        found = [(d["kind"], d["state"]) for d in _get(f"{url}/api/channels/{channel['id']}/deliveries")["items"]]
        return found if any(kind == "recovered" for kind, _ in found) else None

    deliveries = block_until(told, timeout=30, interval=0.2, what="the README channel's recovered delivery")
    assert [kind for kind, state in deliveries if state != "suppressed"] == ["recovered", "failed"], deliveries


def _first_task_ran(url: str) -> None:
    done = block_until(lambda: _ran(url, 1), timeout=30, interval=0.1, what="greet-world's triggered run")
    result = _get(f"{url}/api/runs/{done['id']}")["result"]
    assert json.loads(result)["greeting"] == "hello world", result


def _applied(url: str) -> None:
    jobs = _get(f"{url}/api/jobs")["items"]
    assert sorted(job["name"] for job in jobs) == ["cleanup", "notify", "reindex"], jobs
    assert all(job["managed_by"]["tool"] == "cronos-apply" for job in jobs), jobs
    assert next(job for job in jobs if job["name"] == "notify")["payload"]["headers"]["Authorization"] == "***"


def _rerun_ran(url: str) -> None:
    """docs/run-now.md: the re-run of a past tick ran with its override, then again without it."""
    runs = _get(f"{url}/api/jobs/1/runs")["items"]
    tick = max(runs, key=lambda run: run["attempt"])["scheduled_for"]
    attempts = {run["attempt"]: run for run in runs if run["scheduled_for"] == tick}
    assert sorted(attempts) == [1, 2] and attempts[1]["trigger"] == "manual", runs
    for attempt, target in ((1, "orders"), (2, "users")):
        done = block_until(lambda a=attempt: _ran_run(url, attempts[a]["id"]), timeout=30, what="the re-run")
        assert json.loads(done["result"])["target"] == target, done


def _ran_run(url: str, run_id: int) -> dict[str, Any] | None:
    run: dict[str, Any] = _get(f"{url}/api/runs/{run_id}")
    return run if run["state"] == "completed" else None


def _hooked(url: str) -> None:
    """docs/triggers.md: both trigger URLs' calls (bearer, then signed) ran with their inputs."""

    def both() -> list[str] | None:
        runs = _get(f"{url}/api/jobs/1/runs")["items"]
        done = [_get(f"{url}/api/runs/{run['id']}") for run in runs if run["state"] == "completed"]
        return sorted(json.loads(run["result"])["target"] for run in done) if len(done) == 2 else None

    assert block_until(both, timeout=30, what="the two hook runs") == ["docs-v2", "signed"]


def _calendars(url: str) -> None:
    """docs/calendars.md: the deploy blackout skipped heartbeat's ticks, naming itself; the pause lifted."""
    heartbeat = next(job for job in _get(f"{url}/api/jobs")["items"] if job["name"] == "heartbeat")
    assert heartbeat["status"] == "active" and heartbeat["paused_until"] is None, heartbeat
    runs = _get(f"{url}/api/jobs/{heartbeat['id']}/runs?state=skipped&limit=100")["items"]
    assert any(run["skip_reason"] == "blackout:deploy" for run in runs), runs


def _backfilled(url: str) -> None:
    """docs/backfill.md: the paused job's past ticks ran as backfill runs, each its tick's attempt 1."""
    done = block_until(lambda: _ran(url, 1, trigger="backfill"), timeout=30, what="a backfill run")
    runs = [run for run in _get(f"{url}/api/jobs/1/runs")["items"] if run["trigger"] == "backfill"]
    assert runs and all(run["attempt"] == 1 for run in runs) and done["scheduled_for"] < done["created_at"], runs


def _labelled(url: str) -> None:
    """docs/labels.md: the selector finds the data team's jobs, the bulk trigger ran the web team's."""
    data = _get(f"{url}/api/jobs?selector=team%3Ddata")["items"]
    assert sorted(job["name"] for job in data) == ["orders-export", "users-export"], data
    assert all(job["status"] == "active" and job["managed_by"]["tool"] == "cronos-apply" for job in data), data
    web = _get(f"{url}/api/jobs?selector=team%3Dweb")["items"]
    block_until(lambda: _ran(url, web[0]["id"]), timeout=30, what="the bulk-triggered run of cache-warm")


def _grouped(url: str) -> None:
    """docs/concurrency-groups.md: the group's limit was raised, its jobs' runs waited for it and ran."""
    group = _get(f"{url}/api/concurrency-groups/warehouse")
    assert group["limit"] == 3 and group["jobs"] == 3, group
    # Which job's runs waited, and when they finish, is the claims' race: wait for one of any member.
    members = [member["id"] for member in group["members"]]
    seen: set[int] = set()

    def a_waited_run_completed() -> dict[str, Any] | None:
        for job_id in members:
            for run in _get(f"{url}/api/jobs/{job_id}/runs?state=completed&limit=100")["items"]:
                if run["id"] in seen:
                    continue
                seen.add(run["id"])
                detail: dict[str, Any] = _get(f"{url}/api/runs/{run['id']}")
                if detail["waiting_for"] == "warehouse":
                    return detail
        return None

    block_until(a_waited_run_completed, timeout=60, interval=0.5, what="a run that waited for the group, completed")


def _intervals_ran(url: str) -> None:
    """docs/intervals.md: the heartbeat's scheduled runs fell on its 2 s ticks, then on its 3 s ones."""
    runs = [run for run in _get(f"{url}/api/jobs/1/runs")["items"] if run["trigger"] == "schedule"]
    seconds = [int(datetime.fromisoformat(run["scheduled_for"]).timestamp() * 1000) for run in runs]
    assert len(runs) >= 3 and all(s % 2000 == 0 or s % 3000 == 0 for s in seconds), runs


def _union_ran(url: str) -> None:
    """docs/schedules.md: the heartbeat's scheduled runs fell on the union of its 2 s and 3 s entries
    (then its 5 s one), each tick once."""
    runs = [run for run in _get(f"{url}/api/jobs/2/runs?limit=200")["items"] if run["trigger"] == "schedule"]
    seconds = [int(datetime.fromisoformat(run["scheduled_for"]).timestamp() * 1000) for run in runs]
    assert len(runs) >= 4 and all(s % 2000 == 0 or s % 3000 == 0 or s % 5000 == 0 for s in seconds), runs
    assert len({(run["scheduled_for"], run["attempt"]) for run in runs}) == len(runs), "a shared tick ran once"


def _output_kept(url: str) -> None:
    """docs/run-output.md: the report run's log and print lines, in the order written."""
    done = block_until(lambda: _ran(url, 1), timeout=30, what="the report run")
    lines = [line["line"] for line in _get(f"{url}/api/runs/{done['id']}/output")["lines"]]
    assert lines[:2] == ["INFO cronos.task.report: exporting orders", "orders: done"] and len(lines) == 6, lines


def _usage_kept(url: str) -> None:
    """docs/run-usage.md: the crunch run's usage, its CPU time its thread's."""
    done = block_until(lambda: _ran(url, 1), timeout=30, what="the crunch run")
    usage = _get(f"{url}/api/runs/{done['id']}")["usage"]
    assert usage["cpu_ms"] > 0 and usage["wall_ms"] >= usage["cpu_ms"] * 0.9, usage


def _traced(url: str) -> None:
    """docs/tracing.md: with the page's .env (an OTLP endpoint), the task got its run's traceparent:
    the one derived from the cluster id and the run id (cronos.traces), sampled."""
    done = block_until(lambda: _ran(url, 1), timeout=30, what="the close-day run")
    trace_id, span_id = run_span_ids(_get(f"{url}/api/cluster")["cluster_id"], done["id"])
    result = json.loads(_get(f"{url}/api/runs/{done['id']}")["result"])
    assert result == {"traceparent": traceparent(trace_id, span_id, sampled=True)}, result


def _joined(url: str) -> None:
    """docs/chains.md: load ran once per tick both extracts ran, each run explained by both parents'
    runs; the page ran once, after the export's last attempt failed (not after the first)."""
    loads = [run for run in _get(f"{url}/api/jobs/3/runs?limit=500")["items"] if run["state"] != "skipped"]
    ticks = [run["scheduled_for"] for run in loads]
    assert loads and len(ticks) == len(set(ticks)) and all(run["trigger"] == "chain" for run in loads), loads
    ran = [join for join in _get(f"{url}/api/jobs/3/joins?limit=500")["items"] if join["decided"] == "ran"]
    assert ran and all(sorted(join["parents"]) == [1, 2] for join in ran), ran
    exports = sorted(_get(f"{url}/api/jobs/4/runs")["items"], key=lambda run: run["attempt"])
    assert [(run["attempt"], run["state"]) for run in exports] == [(1, "failed"), (2, "failed")], exports
    (page,) = _get(f"{url}/api/jobs/5/runs")["items"]
    assert page["parent_run_id"] == exports[1]["id"], page


# What a page's commands should have done, beyond each one succeeding.
AFTERWARDS: dict[str, Callable[[str], None]] = {
    "README.md": _readme_told,
    "docs/quickstart.md": _seed_job_ran,
    "docs/tutorial.md": _first_task_ran,
    "docs/jobs-as-code.md": _applied,
    "docs/run-now.md": _rerun_ran,
    "docs/triggers.md": _hooked,
    "docs/calendars.md": _calendars,
    "docs/backfill.md": _backfilled,
    "docs/labels.md": _labelled,
    "docs/concurrency-groups.md": _grouped,
    "docs/intervals.md": _intervals_ran,
    "docs/schedules.md": _union_ran,
    "docs/run-output.md": _output_kept,
    "docs/run-usage.md": _usage_kept,
    "docs/tracing.md": _traced,
    "docs/chains.md": _joined,
}


@contextlib.contextmanager
def _cluster(work: Path, services: Services, database_url: str, key_prefix: str, imports: list[str]) -> Iterator[str]:
    """`cronos dev --import ...` on a free port in `work` (the reader's folder); yields its URL."""
    port = free_port()
    log_path = work.parent / "cronos-dev.log"
    argv = [str(BIN / "cronos"), "dev", *(arg for module in imports for arg in ("--import", module))]
    variables = clean_env(
        PORT=str(port),
        DATABASE_URL=database_url,
        REDIS_URL=services.redis_url,
        CRONOS_KEY_PREFIX=key_prefix,
        CRONOS_API_HOST="127.0.0.1",
        PYTHONPATH=f"{work}:{REPO}",  # the page's own modules (myapp/), and the checkout
    )
    url = f"http://127.0.0.1:{port}"
    with serving(argv, ready=f"{url}/health", log=log_path, what="cronos dev", timeout=45, stop_s=30, cwd=work,
                 env=variables):  # fmt: skip
        yield url


def _script(block: Block, port: int) -> str:
    text = "\n".join(block.commands()) if block.language in ("console", "shell-session") else block.text
    return text.replace("localhost:3002", f"localhost:{port}").replace(".venv/bin/", f"{BIN}/")


def _shims(folder: Path) -> Path:
    """A `curl` that fails on an HTTP error status, as a reader would notice one."""
    folder.mkdir()
    shim = folder / "curl"
    shim.write_text(f'#!/bin/sh\nexec {CURL} --fail-with-body "$@"\n')
    shim.chmod(0o755)
    return folder


@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(REPO)) for p in RUN_PAGES])
def test_the_commands_of_the_page_run(
    page: Path, tmp_path: Path, services: Services, database_url: str, key_prefix: str
) -> None:
    if CURL is None:
        pytest.skip("curl is not installed (the pages' examples use it)")
    work = tmp_path / "work"
    work.mkdir()
    modules = ["cronos.example_tasks"]
    for block in blocks(page):
        if block.file is not None:
            target = work / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text + "\n")
            if block.file.endswith(".py"):
                modules.append(block.file.removesuffix(".py").replace("/", "."))
    shims = _shims(tmp_path / "shims")
    with _cluster(work, services, database_url, key_prefix, modules) as url:
        port = int(url.rsplit(":", 1)[1])
        env = clean_env(
            CRONOS_API_URL=url,
            DATABASE_URL=database_url,
            REDIS_URL=services.redis_url,
            CRONOS_KEY_PREFIX=key_prefix,
            PATH=f"{shims}:{BIN}:/usr/local/bin:/usr/bin:/bin",
        )
        for block in _runnable(page):
            done = subprocess.run(
                ["bash", "-e", "-x", "-o", "pipefail", "-c", _script(block, port)],
                cwd=work, env=env, capture_output=True, text=True, timeout=45,
            )  # fmt: skip
            assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stderr[-3000:]}\n{done.stdout}"
        check = AFTERWARDS.get(str(page.relative_to(REPO)))
        if check is not None:
            check(url)


def test_every_command_is_run_or_says_why_not() -> None:
    """The collection itself: what is excused gives a reason, every marker sits on a block, and the
    pages this test runs are the ones a newcomer follows."""
    for page in pages():
        for block in blocks(page):
            if block.not_run is not None:
                assert block.language in {"sh", "bash", "shell", "zsh", "console", "shell-session"}, block.where
                assert len(block.not_run) >= 10, f"{block.where}: say why it is not run"
            if block.file is not None:
                assert not block.file.startswith("/") and ".." not in block.file, block.where
        marked = sum(1 for block in blocks(page) if block.not_run is not None or block.file is not None)
        assert markers(page) == marked, f"{page}: a `not run` or `file` comment not right before a fenced block"
    ran = {str(page.relative_to(REPO)) for page in RUN_PAGES}
    assert {"README.md", "docs/quickstart.md", "docs/tutorial.md", "docs/cli.md"} <= ran, ran
    assert set(AFTERWARDS) <= ran, set(AFTERWARDS) - ran
    readme = _runnable(REPO / "README.md")
    assert [c.split()[0] for b in readme for c in b.commands()].count("curl") == 6  # the seed's Try it
