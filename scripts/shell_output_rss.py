"""Measure the executor's memory while a shell run prints a lot (issue 11: 300 MB took it 57 -> 329 MB).

Runs the `shell` kind in this process, as the executor does, on a job printing N bytes, and
prints VmRSS before and after and the peak (VmHWM, reset before the run). No PostgreSQL or
Redis needed: the kind is the only code that touches the output.

    python scripts/shell_output_rss.py                  # this tree, 300 MB
    python scripts/shell_output_rss.py --rev HEAD~5     # the shell kind of another revision
    python scripts/shell_output_rss.py --bytes 50000000
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import aiohttp

from cronos.settings import Settings
from cronos.store.runs import ClaimedRun
from executor.kinds import Env, RunFailed, shell


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the current RSS


def shell_module(rev: str | None) -> ModuleType:
    if rev is None:
        return shell
    source = subprocess.run(
        ["git", "show", f"{rev}:executor/kinds/shell.py"], check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "shell_at_rev.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("shell_at_rev", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def measure(module: ModuleType, n_bytes: int) -> None:
    now = datetime.now(UTC)
    run = ClaimedRun(
        id=1,
        job_id=1,
        scheduled_for=now,
        attempt=1,
        trigger="manual",
        epoch=None,
        started_at=now,
        exclusive=True,
        name="rss",
        kind="shell",
        payload={"argv": ["head", "-c", str(n_bytes), "/dev/zero"]},
        timeout_s=600,
        max_retries=0,
        retry_backoff_s=0,
        concurrency_policy="forbid",
        webhook_secret="",
    )
    async with aiohttp.ClientSession() as http:
        env = Env(Settings(allow_shell=True), http)
        before = status_kb("VmRSS")
        reset_peak()
        started = asyncio.get_running_loop().time()
        try:
            result = await module.run(run, env)
        except RunFailed as exc:
            result = f"failed: {exc.message}\n{exc.result}"
        took = asyncio.get_running_loop().time() - started
        after, peak = status_kb("VmRSS"), status_kb("VmHWM")
    print(f"output {n_bytes / 1e6:g} MB in {took:.2f} s; result {len(result or '')} chars")
    print(f"RSS before {before / 1024:.1f} MB, after {after / 1024:.1f} MB, peak {peak / 1024:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=int, default=300_000_000)
    parser.add_argument("--rev", help="measure the shell kind of this git revision instead")
    args = parser.parse_args()
    asyncio.run(measure(shell_module(args.rev), args.bytes))


if __name__ == "__main__":
    main()
