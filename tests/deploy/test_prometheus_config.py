"""deploy/prometheus/prometheus.yml passes `promtool check config` (Debian package `prometheus`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.manifests import DEPLOY

PROMTOOL = shutil.which("promtool")
CONFIG = DEPLOY / "prometheus" / "prometheus.yml"


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
def test_promtool_accepts_the_config() -> None:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "config", str(CONFIG)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
def test_promtool_rejects_a_broken_config(tmp_path: Path) -> None:
    """Negative control: the check above can fail."""
    assert PROMTOOL is not None
    broken = tmp_path / "prometheus.yml"
    broken.write_text(CONFIG.read_text().replace("type: A", "type: AAAAA", 1))
    done = subprocess.run([PROMTOOL, "check", "config", str(broken)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
