"""`shell` jobs, run by a real executor."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from cronos.models import Run
from cronos.settings import Settings
from executor.kinds import shell
from executor.service import Executor
from tests.integration.ledger_helpers import Harness
from tests.waiting import wait_for


async def test_shell_is_refused_by_default(harness: Harness, settings: Settings) -> None:
    job = await harness.job(kind="shell", payload={"argv": ["echo", "hi"]})
    await harness.queue(job)
    async with Executor(settings) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert run.state == "failed" and run.error is not None and "CRONOS_ALLOW_SHELL=1" in run.error


async def test_shell_runs_argv_when_allowed(harness: Harness, settings: Settings) -> None:
    ok = await harness.job(kind="shell", payload={"argv": ["sh", "-c", "echo out; echo err >&2", "ignored; rm -rf /"]})
    bad = await harness.job(kind="shell", payload={"argv": ["sh", "-c", "exit 3"]})
    await harness.queue(ok)
    await harness.queue(bad)
    async with Executor(msgspec.structs.replace(settings, allow_shell=True)) as ex:
        await ex.run_once()
    (done,) = await harness.runs(ok)
    assert done.state == "completed" and done.result == "exit 0\nstdout:\nout\n\nstderr:\nerr\n"
    (failed,) = await harness.runs(bad)
    assert (failed.state, failed.error) == ("failed", "exit code 3")


async def test_cancelled_shell_run_kills_its_process_group(
    harness: Harness, settings: Settings, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    job = await harness.job(kind="shell", payload={"argv": ["sh", "-c", script]}, timeout_s=0.5)
    await harness.queue(job)
    async with Executor(msgspec.structs.replace(settings, allow_shell=True)) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert (run.state, run.error) == ("failed", "timed out after 0.5 s")
    await _wait_gone(int(pidfile.read_text()), "the grandchild `sleep`")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


# --- issue 11: a clean environment, bounded output, runs that end on time -------------------


def _shell_settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, allow_shell=True)


async def test_shell_child_gets_a_clean_environment(
    harness: Harness, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The executor runs in this process: whatever is in os.environ here is the executor's environment.
    marker = f"CRONOS_TEST_MARKER_{os.getpid()}"
    monkeypatch.setenv(marker, "executor-only")
    monkeypatch.setenv("DATABASE_URL", settings.database_url)
    monkeypatch.setenv("REDIS_URL", settings.redis_url)
    job = await harness.job(kind="shell", payload={"argv": ["printenv"], "env": {"GREETING": "hello there"}})
    await harness.queue(job)
    async with Executor(_shell_settings(settings)) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert run.state == "completed" and run.result is not None
    stdout = run.result.split("\nstdout:\n", 1)[1].split("\nstderr:\n", 1)[0]
    seen = dict(line.split("=", 1) for line in stdout.splitlines() if line)
    assert seen == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ["HOME"],  # the executor's user's home
        "LANG": "C.UTF-8",
        "GREETING": "hello there",
    }
    assert marker not in run.result and "DATABASE_URL" not in run.result and settings.database_url not in run.result


@pytest.mark.parametrize(
    ("key", "named"),
    [("PATH", "'PATH'"), ("LD_PRELOAD", "'LD_PRELOAD'"), ("PYTHONPATH", "'PYTHONPATH'"), ("A=B", "'A=B'")],
)
async def test_shell_env_may_not_set_path_ld_or_python(
    harness: Harness, settings: Settings, tmp_path: Path, key: str, named: str
) -> None:
    started = tmp_path / "started"
    job = await harness.job(kind="shell", payload={"argv": ["touch", str(started)], "env": {key: "/tmp/x"}})
    await harness.queue(job)
    async with Executor(_shell_settings(settings)) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert run.state == "failed" and run.error is not None and named in run.error, run.error
    assert not started.exists(), "nothing may start when the env is refused"


async def test_big_shell_output_is_drained_not_buffered(harness: Harness, settings: Settings) -> None:
    size = 50_000_000
    job = await harness.job(kind="shell", payload={"argv": ["head", "-c", str(size), "/dev/zero"]})
    await harness.queue(job)
    async with Executor(_shell_settings(settings)) as ex:
        tracemalloc.start()
        try:
            await ex.run_once()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    (run,) = await harness.runs(job)
    assert run.state == "completed" and run.result is not None
    limit = settings.result_max_bytes
    assert f"…[{size - limit} bytes dropped]…" in run.result  # head and tail kept, the rest counted
    assert len(run.result.encode()) < limit * 3 + 200  # NULs stored as U+FFFD: 3 bytes each
    assert peak < 8_000_000, f"the executor allocated {peak / 1e6:.1f} MB for {size / 1e6:.0f} MB of output"


_ESCAPE = "setsid sh -c 'echo $$ > {pidfile}; exec sleep 40'"


@pytest.mark.parametrize(
    "redirect",
    [
        pytest.param("", id="grandchild-holds-the-pipes"),
        pytest.param(" >/dev/null 2>&1", id="grandchild-let-go-of-the-pipes"),
    ],
)
async def test_timeout_ends_the_run_at_once_and_kills_an_escaped_grandchild(
    harness: Harness, settings: Settings, tmp_path: Path, redirect: str
) -> None:
    escape, run, took = await _run_escape_once(harness, settings, tmp_path, f"{redirect} & sleep 45", timeout_s=1)
    assert (run.state, run.error) == ("failed", "timed out after 1 s")
    # The work's own time (kill and reap included) is the precise measure; run_once adds claiming and recording.
    assert run.duration_ms is not None and run.duration_ms < 2000, f"the work took {run.duration_ms} ms"
    assert took < 4, f"run_once took {took:.2f} s"
    await escape.cleaned_up("the escaped grandchild")


async def test_child_exit_ends_the_run_though_a_grandchild_holds_the_pipes(
    harness: Harness, settings: Settings, tmp_path: Path
) -> None:
    escape, run, took = await _run_escape_once(harness, settings, tmp_path, " & echo done", timeout_s=30)
    assert (run.state, run.result) == ("completed", "exit 0\nstdout:\ndone\n\nstderr:\n")
    assert run.duration_ms is not None and run.duration_ms < (shell.PIPE_GRACE_S + 1) * 1000, run.duration_ms
    assert took < 4, f"run_once took {took:.2f} s"
    await escape.cleaned_up("the grandchild holding the pipes")


async def test_drain_kills_a_running_shell_run_and_its_escaped_grandchild(
    harness: Harness, settings: Settings, tmp_path: Path
) -> None:
    escape = await _Escape.queue(harness, tmp_path, " & sleep 45", timeout_s=30)
    async with Executor(msgspec.structs.replace(_shell_settings(settings), drain_timeout_s=0.3)) as ex:
        task = asyncio.create_task(ex.run())

        async def escaped() -> bool:
            return bool(_read(escape.pidfile))

        await wait_for(escaped, timeout=5, what="the grandchild to escape")
        ex.stop()
        await asyncio.wait_for(task, 5)
    (run,) = await harness.runs(escape.job)
    assert (run.state, run.error) == ("failed", "cancelled: executor shutting down")
    await escape.cleaned_up("the escaped grandchild")


@dataclass(frozen=True, slots=True)
class _Escape:
    """A queued shell job whose child (pid in `childfile`) starts a grandchild that escapes into its
    own session (pid in `pidfile`), then goes on with `tail`; and the pipes open before it ran."""

    job: int
    pidfile: Path
    childfile: Path
    pipes: int

    @classmethod
    async def queue(cls, harness: Harness, tmp_path: Path, tail: str, timeout_s: float) -> _Escape:
        pidfile, childfile = tmp_path / "grandchild.pid", tmp_path / "child.pid"
        script = f"echo $$ > {childfile}; {_ESCAPE.format(pidfile=pidfile)}{tail}"
        job = await harness.job(kind="shell", payload={"argv": ["sh", "-c", script]}, timeout_s=timeout_s)
        await harness.queue(job)
        return cls(job, pidfile, childfile, _open_pipes())

    async def cleaned_up(self, grandchild: str) -> None:
        """The grandchild killed, the child reaped, no pipe left open."""
        await _wait_gone(int(_read(self.pidfile)), grandchild)
        await _wait_reaped(int(_read(self.childfile)))
        assert _open_pipes() == self.pipes, "pipes left open"


async def _run_escape_once(
    harness: Harness, settings: Settings, tmp_path: Path, tail: str, timeout_s: float
) -> tuple[_Escape, Run, float]:
    """An _Escape job through one run_once of a shell-enabled executor: the job, its run, and the
    seconds run_once took."""
    escape = await _Escape.queue(harness, tmp_path, tail, timeout_s)
    async with Executor(_shell_settings(settings)) as ex:
        started = time.monotonic()
        await ex.run_once()
        took = time.monotonic() - started
    (run,) = await harness.runs(escape.job)
    return escape, run, took


def _read(path: Path) -> str:
    with contextlib.suppress(FileNotFoundError):
        return path.read_text().strip()
    return ""


def _listed(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()  # a zombie is still listed


def _open_pipes() -> int:
    """Pipes this process holds (the executor is in it): each shell run opens two."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("pipe:")
    return count


async def _wait_gone(pid: int, what: str) -> None:
    """Killed: gone, or a zombie waiting for its (new) parent, init, to reap it."""

    async def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return _zombie(pid)

    await wait_for(gone, timeout=5, what=f"{what} ({pid}) to be killed")


async def _wait_reaped(pid: int) -> None:
    """The direct child is the executor's to reap: no zombie left."""

    async def reaped() -> bool:
        return not _listed(pid)

    await wait_for(reaped, timeout=5, what=f"the child {pid} to be reaped")
