"""The run page's Usage (issue 39) in a real headless Chromium against `cronos dev`: a shell run
that held 64 MiB and burned CPU shows what its processes used once it ended."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, go, screenshot_artifact, text, wait
from tests.integration.test_run_usage import HUNGRY

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def _figure(shown: str, label: str) -> str:
    found = re.search(rf"^{label}\n(.+)$", shown, re.MULTILINE)
    assert found is not None, shown
    return found.group(1)


def test_the_run_page_shows_what_a_shell_run_used(browser: Any, stack: Stack) -> None:
    driver = browser
    job = call(stack, "POST", "/api/jobs", {
        "name": "hungry-shell", "cron_expression": "@yearly", "status": "paused", "kind": "shell",
        "payload": {"argv": [sys.executable, "-c", HUNGRY]},
    })  # fmt: skip
    run = call(stack, "POST", f"/api/jobs/{job['id']}/trigger")
    go(driver, stack, f"#/runs/{run['id']}")
    wait(driver, lambda d: "completed" in text(d, ".title"), timeout=60, what="the run completed")
    shown = wait(driver, lambda d: text(d, "#usage"), what="the run's usage")
    screenshot_artifact(driver, "run-usage")
    memory = _figure(shown, "Peak memory")
    assert memory.endswith(" MiB") and 64 <= float(memory.removesuffix(" MiB")) < 512, shown
    cpu = _figure(shown, "CPU")
    assert cpu.endswith(" ms") or cpu.endswith(" s"), shown
    seconds = float(cpu.split()[0]) / (1000 if cpu.endswith(" ms") else 1)
    assert seconds >= 0.4, shown  # what the child burned, at least
    assert {"Work (wall)", "CPU user", "CPU system"} <= set(shown.splitlines()), shown
