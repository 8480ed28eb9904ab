"""deploy/prometheus/prometheus.yml passes `promtool check config` (Debian package `prometheus`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.manifests import DEPLOY

PROMTOOL = shutil.which("promtool")
CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
ALERT_TESTS = DEPLOY / "prometheus" / "alerts.test.yml"


SECRET_FILE = "/run/secrets/metrics_token"


def _here(tmp_path: Path) -> Path:
    """The config with the metrics token file (a compose secret, only in the container) made
    to exist here: promtool checks that a credentials_file exists."""
    token = tmp_path / "metrics_token"
    token.write_text("a-random-secret-of-more-than-32-characters\n")
    text = CONFIG.read_text()
    assert SECRET_FILE in text
    config = tmp_path / "prometheus.yml"
    config.write_text(text.replace(SECRET_FILE, str(token)))
    (tmp_path / ALERTS.name).write_text(ALERTS.read_text())  # rule_files are relative to the config
    return config


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
def test_promtool_accepts_the_config(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    config = _here(tmp_path)
    done = subprocess.run([PROMTOOL, "check", "config", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
def test_promtool_rejects_a_broken_config(tmp_path: Path) -> None:
    """Negative control: the check above can fail."""
    assert PROMTOOL is not None
    broken = _here(tmp_path)
    broken.write_text(broken.read_text().replace("type: A", "type: AAAAA", 1))
    done = subprocess.run([PROMTOOL, "check", "config", str(broken)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
def test_the_alert_rules_pass_their_unit_tests() -> None:
    done = _promtool("test", "rules", str(ALERT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
def test_the_alert_rule_tests_can_fail(tmp_path: Path) -> None:
    """Negative control: an alert that never fires fails its test."""
    (tmp_path / ALERTS.name).write_text(ALERTS.read_text().replace("> 0", "> 1000"))
    (tmp_path / ALERT_TESTS.name).write_text(ALERT_TESTS.read_text())
    done = _promtool("test", "rules", str(tmp_path / ALERT_TESTS.name))
    assert done.returncode != 0
