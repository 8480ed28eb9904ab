"""`cronos token create|list|revoke|reopen-local` as a real process, the token then used against a live API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cronos.settings import VARIABLES, Settings
from tests.integration.api_client import SEED_JOB, running_api

CRONOS = str(Path(sys.executable).parent / "cronos")
pytestmark = pytest.mark.cluster


def _token(args: list[str], cwd: Path, database_url: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env = {**clean, "DATABASE_URL": database_url}
    return subprocess.run([CRONOS, "token", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30)


def _one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), done.stderr


async def test_cli_creates_lists_and_revokes_a_token_used_by_the_api(
    tmp_path: Path, settings: Settings, database_url: str
) -> None:
    made = _token(["create", "--name", "ci", "--scope", "write", "--expires", "90d"], tmp_path, database_url)
    assert made.returncode == 0, made.stderr
    lines = made.stdout.strip().splitlines()
    token = lines[-1]  # what `TOKEN=$(cronos token create ... | tail -1)` captures
    assert token.startswith("cronos_") and " " not in token
    assert "shown this once" in made.stdout

    listed = _token(["list"], tmp_path, database_url)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.strip().splitlines()
    assert header.split() == ["NAME", "SCOPES", "CREATED", "LAST", "USED", "EXPIRES"]
    assert row.split()[:2] == ["ci", "write"] and "never" in row  # never used yet
    assert token not in listed.stdout

    async with running_api(settings) as api:
        assert (await api.call("POST", "/api/jobs", json=SEED_JOB, token=token)).status == 201
        assert (await api.call("GET", "/api/jobs")).status == 401  # a token exists: protected mode is over
        revoked = _token(["revoke", "ci"], tmp_path, database_url)
        assert revoked.returncode == 0, revoked.stderr
        assert (await api.call("GET", "/api/jobs", token=token)).status == 401
        # No usable token left, yet protected mode stays closed: only the operator reopens it.
        assert (await api.call("GET", "/api/jobs/1/history", token=None)).status == 401
        reopened = _token(["reopen-local"], tmp_path, database_url)
        assert reopened.returncode == 0 and "Protected mode reopened" in reopened.stdout, reopened.stderr
        history = await api.call("GET", "/api/jobs/1/history", token=None)
        assert history.status == 200  # loopback is served again
        assert history.body["items"][0]["actor"] == "ci"
        tokens = await api.call("GET", "/api/tokens/history", token=None)
        latest = tokens.body["items"][0]
        assert (latest["action"], latest["actor"]) == ("protected-mode-reopened", "cli")


def test_cli_bad_input_is_one_line_and_a_non_zero_exit(tmp_path: Path, database_url: str) -> None:
    assert _token(["create", "--name", "ci", "--scope", "read"], tmp_path, database_url).returncode == 0
    _one_line_error(_token(["create", "--name", "x", "--scope", "root"], tmp_path, database_url), "scope", "root")
    bad_age = ["create", "--name", "x", "--scope", "read", "--expires", "soon"]
    _one_line_error(_token(bad_age, tmp_path, database_url), "--expires")
    _one_line_error(_token(["create", "--name", "ci", "--scope", "read"], tmp_path, database_url), "already exists")
    _one_line_error(_token(["revoke", "nobody"], tmp_path, database_url), "nobody")
    _one_line_error(_token(["create", "--scope", "read"], tmp_path, database_url), "--name")
    down = "postgresql://postgres@127.0.0.1:1/cronos"
    _one_line_error(_token(["list"], tmp_path, down), "postgresql unavailable")
