"""The run page's Output (issue 39) in a real headless Chromium against `cronos dev`: a running
run's lines appear as its executor writes them, then the whole output once it ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Stack
from tests.browser.test_console import call, go, screenshot_artifact, text, wait

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.timeout(120)]


def test_the_run_page_follows_a_running_runs_output_live(browser: Any, stack: Stack, tmp_path: Path) -> None:
    driver, gate = browser, tmp_path / "gate"
    job = call(stack, "POST", "/api/jobs", {
        "name": "gated-output", "cron_expression": "@yearly", "status": "paused",
        "payload": {"action": "out.gated", "gate": str(gate)},
    })  # fmt: skip
    run = call(stack, "POST", f"/api/jobs/{job['id']}/trigger")
    go(driver, stack, f"#/runs/{run['id']}")
    # The run waits for the gate, so what the page shows now came while it ran.
    wait(driver, lambda d: "first line" in text(d, "#output"), timeout=30, what="the first line, live")
    wait(driver, lambda d: "waiting for the reader" in text(d, "#output"), what="the log line, live")
    wait(driver, lambda d: "running" in text(d, ".title"), what="the run running (its page refreshes)")
    assert call(stack, "GET", f"/api/runs/{run['id']}")["state"] == "running"
    assert "Following" in text(driver, "#output-status")
    screenshot_artifact(driver, "run-output-live")
    gate.touch()
    wait(driver, lambda d: "last line" in text(d, "#output"), timeout=30, what="the last line")
    wait(driver, lambda d: "completed" in text(d, ".title"), timeout=30, what="the run completed")
    wait(driver, lambda d: text(d, "#output-status") == "3 lines.", what="the whole output, once it ended")
    assert text(driver, "#output").splitlines() == [
        "first line", "WARNING cronos.task.out.gated: waiting for the reader", "last line",
    ]  # fmt: skip
