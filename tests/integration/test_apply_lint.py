"""`cronos apply --dry-run` shows each created or rescheduled job's warnings and, for a change, the
ticks it adds and removes, from a real API on real PostgreSQL; nothing is written."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from cronos.client.apply_cli import run_apply
from cronos.settings import Settings
from tests.integration.api_client import Api, running_api

JOBS = """\
jobs:
  - name: every-90
    cron_expression: "*/90 * * * *"
    payload: {action: reindex}
  - name: nightly
    cron_expression: "30 2 * * *"
    timezone: Europe/Berlin
    payload: {action: reindex}
"""


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _dry_run(api: Api, settings: Settings, path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    args = argparse.Namespace(files=[str(path)], dry_run=True, prune=False, selector=None)
    client = msgspec.structs.replace(settings, api_url=api.base)
    assert await asyncio.to_thread(run_apply, args, client) == 0
    return capsys.readouterr().out


async def test_dry_run_shows_warnings_and_the_ticks_an_edit_changes(
    api: Api, settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    out = await _dry_run(api, settings, jobs, capsys)
    assert "create     every-90" in out and "at minute 0 of every hour" in out
    assert "warning step_exceeds_field:" in out and "suggestion: for every 90 minutes" in out
    assert "`every: 90m`" in out
    assert (await api.call("GET", "/api/jobs")).body["items"] == []  # a dry run writes nothing

    await api.create(name="nightly", cron_expression="30 3 * * *", timezone="Europe/Berlin")
    out = await _dry_run(api, settings, jobs, capsys)
    nightly = out[out.index("update     nightly") :]
    assert "30 2 * * * (Europe/Berlin): at 02:30 every day" in nightly
    assert "warning dst_gap:" in nightly and "warning dst_fold:" in nightly  # a change comes within a year
    assert "ticks until" in nightly and "7 added, 7 removed, 0 kept" in nightly
    assert "  + " in nightly and "  - " in nightly and "… 2 more" in nightly
