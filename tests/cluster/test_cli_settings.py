"""The `cronos` command's handling of configuration, as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cronos.settings import VARIABLES
from tests.deploy.manifests import VERSION

CRONOS = str(Path(sys.executable).parent / "cronos")
pytestmark = pytest.mark.cluster


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    return subprocess.run([CRONOS, *args], cwd=cwd, env={**clean, **env}, capture_output=True, text=True, timeout=30)


def test_bad_port_exits_2_with_one_line_naming_it(tmp_path: Path) -> None:
    done = _run(["api"], tmp_path, PORT="abc")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "PORT" in lines[0], done.stderr
    assert done.stdout == ""


def test_bad_value_in_dotenv_exits_2(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CRONOS_LEADER_TTL_MS=5\n")
    done = _run(["api"], tmp_path)
    assert done.returncode == 2 and "CRONOS_LEADER_TTL_MS" in done.stderr


def test_help_lists_the_variables(tmp_path: Path) -> None:
    for args in (["--help"], ["api", "--help"]):
        done = _run(args, tmp_path)
        assert done.returncode == 0
        for name in ("PORT", "DATABASE_URL", "REDIS_URL", "CRONOS_NODE_ID", "CRONOS_KEY_PREFIX", "CRONOS_LOG_LEVEL"):
            assert name in done.stdout, (args, name)


def test_version_is_the_releases(tmp_path: Path) -> None:
    done = _run(["--version"], tmp_path)
    assert (done.returncode, done.stdout) == (0, f"cronos {VERSION}\n"), done.stderr
