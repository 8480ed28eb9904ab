"""`shell` runs: an argv list (never a shell string), off unless the operator allows it.

The process gets its own session, so cancelling the run (timeout, drain, lost
ownership) kills its whole process group, grandchildren included.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import msgspec

from cronos.models import ShellPayload
from cronos.store.runs import ClaimedRun
from executor.kinds.base import Env, RunFailed, excerpt


async def run(run: ClaimedRun, env: Env) -> str | None:
    if not env.settings.allow_shell:
        raise RunFailed("shell jobs are disabled on this executor (set CRONOS_ALLOW_SHELL=1 to allow them)")
    try:
        payload = msgspec.convert(run.payload, ShellPayload)
    except msgspec.ValidationError as exc:
        raise RunFailed(f"invalid shell payload: {exc}") from exc
    try:
        proc = await asyncio.create_subprocess_exec(
            *payload.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=payload.cwd,
            env={**os.environ, **payload.env} if payload.env else None,
            start_new_session=True,
        )
    except OSError as exc:
        raise RunFailed(f"could not start {payload.argv[0]!r}: {exc}") from exc
    try:
        stdout, stderr = await proc.communicate()
    except BaseException:
        _kill_group(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            await asyncio.shield(proc.wait())
        raise
    limit = env.settings.result_max_bytes
    result = f"exit {proc.returncode}\nstdout:\n{excerpt(stdout, limit)}\nstderr:\n{excerpt(stderr, limit)}"
    if proc.returncode != 0:
        raise RunFailed(f"exit code {proc.returncode}", result=result)
    return result


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
