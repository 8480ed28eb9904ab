"""`make run` (issue 23, item 2): the runtime only, the user's own tasks, and what to do next printed
before the cluster's logs. The recipes are read with `make -n -B` (nothing is run or installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.manifests import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def recipe(*args: str) -> list[str]:
    """The commands `make` would run, every target out of date (make -n -B runs none of them)."""
    # Under `make test` (CI) the outer make's MAKEFLAGS/MAKELEVEL would make this one print
    # "Entering directory" lines: run it as a top-level make.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return [line.strip() for line in done.stdout.splitlines()]


def test_run_installs_the_runtime_only_and_test_installs_the_toolchain() -> None:
    installs = [line for line in recipe("run") if " install " in line and "/pip " in line]
    assert installs[-1].endswith("pip install --quiet -e .") and not [i for i in installs if "[test]" in i]
    assert any(line.endswith("pip install --quiet -e '.[test]'") for line in recipe("test"))
    assert any(line.endswith("pip install --quiet -e '.[test]'") for line in recipe("lint"))
    # .ci/run's entry point: every test, the parallel ones, the paired ones, then the serial ones
    # (tests/conftest.py), soaks and big benchmarks left to test-long
    parallel, paired, serial, verdict = " ".join(recipe("test")[-4:]).split("; \\ ")
    assert parallel == (
        '.venv/bin/python -m pytest -q -n 2 -m "not serial and not paired and not long" --dist worksteal'
        " --durations=20; parallel=$?"
    )
    assert paired == (
        '.venv/bin/python -m pytest -q -n 2 -m "paired and not long" --dist worksteal --durations=20; paired=$?'
    )
    assert serial == '.venv/bin/python -m pytest -q -m "serial and not long" --durations=20; serial=$?'
    assert verdict == "test $parallel -eq 0 -a $paired -eq 0 -a $serial -eq 0"
    assert recipe("test-long")[-1] == ".venv/bin/python -m pytest -q -m long --durations=20"


def test_run_loads_the_example_tasks_or_the_users() -> None:
    assert recipe("run")[-1] == ".venv/bin/cronos dev --import cronos.example_tasks"
    assert recipe("run", "TASKS=myapp.tasks,myapp.reports")[-1] == (
        ".venv/bin/cronos dev --import myapp.tasks --import myapp.reports"
    )
    assert recipe("run")[-2] == ".venv/bin/python scripts/run_banner.py cronos.example_tasks"


def test_the_banner_names_the_console_a_first_curl_and_the_cli(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PORT"}
    done = subprocess.run(
        [sys.executable, ROOT / "scripts/run_banner.py", "myapp.tasks"],
        cwd=tmp_path, env={**env, "PORT": "4012"}, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line.split(None, 1) for line in done.stdout.splitlines()[1:]]
    shown = {words[0]: words[1] for words in lines if words and words[0].endswith(":")}
    assert shown["console:"] == "http://localhost:4012/"
    assert shown["try:"] == "curl -s http://localhost:4012/health"
    assert shown["tasks:"].startswith("myapp.tasks (your own: make run TASKS=myapp.tasks")
    assert shown["CLI:"].startswith(".venv/bin/cronos --help")
    assert "curl -s -XPOST http://localhost:4012/api/jobs" in done.stdout
    assert '"payload": {"action": "NAME-OF-YOUR-TASK"}' in done.stdout  # reindex is the example tasks'
