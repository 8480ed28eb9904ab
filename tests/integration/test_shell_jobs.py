"""`shell` jobs, run by a real executor."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
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
from tests.cluster.servers import cronos_command
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


# --- issue 22, item 11: nothing survives a shell run --------------------------------------

# The job's own processes wait for the escaped one to write its pid (`until`), so the file is there
# whenever the job ended; the escaped process then sleeps for good.
_UNTIL = "until [ -s {pidfile} ]; do sleep 0.01; done"
_SETSID_F = "setsid -f sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 300'"
_DOUBLE_FORK = """
import os, sys, time
pidfile = sys.argv[1]
if os.fork():  # the job's own process: waits for the daemon's pid, then exits
    while not os.path.exists(pidfile):
        time.sleep(0.01)
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
null = os.open(os.devnull, os.O_RDWR)  # a daemon lets go of the run's pipes
for fd in (0, 1, 2):
    os.dup2(null, fd)
with open(pidfile + ".tmp", "w") as out:
    out.write(str(os.getpid()))
os.rename(pidfile + ".tmp", pidfile)
time.sleep(300)
"""


def _escape_argv(how: str, pidfile: Path) -> list[str]:
    setsid_f = _SETSID_F.format(pidfile=pidfile)
    until = _UNTIL.format(pidfile=pidfile)
    return {
        "setsid-f": ["sh", "-c", f"{setsid_f}; {until}"],
        "setsid-f-let-go-of-the-pipes": ["sh", "-c", f"{setsid_f} >/dev/null 2>&1; {until}"],
        "setsid-f-then-timeout": ["sh", "-c", f"{setsid_f} >/dev/null 2>&1; {until}; exec sleep 30"],
        "python-double-fork-setsid": [sys.executable, "-c", _DOUBLE_FORK, str(pidfile)],
    }[how]


@pytest.mark.parametrize(
    "how", ["setsid-f", "setsid-f-let-go-of-the-pipes", "setsid-f-then-timeout", "python-double-fork-setsid"]
)
async def test_no_process_survives_a_shell_run(harness: Harness, settings: Settings, tmp_path: Path, how: str) -> None:
    """A process that left the run's session and lost its parent (setsid -f, a daemon's double fork),
    and let go of the pipes, was out of reach of the executor's /proc scan: it outlived the run."""
    pidfile = tmp_path / "escaped.pid"
    timeout_s = 1 if how.endswith("timeout") else 20
    job = await harness.job(kind="shell", payload={"argv": _escape_argv(how, pidfile)}, timeout_s=timeout_s)
    await harness.queue(job)
    try:
        async with Executor(_shell_settings(settings)) as ex:
            await ex.run_once()
        (run,) = await harness.runs(job)
        if how.endswith("timeout"):
            assert (run.state, run.error) == ("failed", "timed out after 1 s")
        else:
            assert run.state == "completed", (run.error, run.result)
        assert _read(pidfile), "the escaped process never started"
        await _wait_gone(int(_read(pidfile)), f"the process escaped by {how}")
    finally:
        _kill_if_sleeping(pidfile)


def _kill_if_sleeping(pidfile: Path) -> None:
    """A leaked `sleep 300` (or the python daemon) of a failed test is not left behind."""
    pid = _read(pidfile)
    if not pid:
        return
    with contextlib.suppress(OSError):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"sleep\x00300" in cmdline or _DOUBLE_FORK.encode() in cmdline:
            os.kill(int(pid), signal.SIGKILL)


# --- issue 22, item 11: a shell run cannot read the executor's environment ---------------------

_ENVIRONS = 'for f in /proc/$PPID/environ /proc/$1/environ; do echo "== $f"; tr "\\0" "\\n" < "$f"; done'


async def test_the_jobs_parent_holds_only_the_jobs_environment(harness: Harness, settings: Settings) -> None:
    """The job's parent was the executor: /proc/$PPID/environ gave DATABASE_URL and the tokens away.
    Now it is the launcher, started with the job's environment and nothing else."""
    argv = ["sh", "-c", 'tr "\\0" "\\n" < /proc/$PPID/environ']
    job = await harness.job(kind="shell", payload={"argv": argv, "env": {"GREETING": "hi"}})
    await harness.queue(job)
    async with Executor(_shell_settings(settings)) as ex:
        await ex.run_once()
    (run,) = await harness.runs(job)
    assert run.state == "completed" and run.result is not None, (run.error, run.result)
    stdout = run.result.split("\nstdout:\n", 1)[1].split("\nstderr:\n", 1)[0]
    assert dict(line.split("=", 1) for line in stdout.splitlines() if line) == shell.child_env(
        {"GREETING": "hi"}, os.environ["HOME"]
    )


@pytest.mark.cluster
@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
async def test_a_job_run_as_the_shell_user_cannot_read_the_executors_environment(
    harness: Harness, settings: Settings, tmp_path: Path
) -> None:
    """A real `cronos executor` process, secrets in its environment, CRONOS_SHELL_USER=nobody: the job
    reads neither its parent's (the launcher's) environment nor the executor's, given its pid.
    (A non-root executor and a job of its own user: the executor is non-dumpable, `prepare`; the
    unit test checks the flag, the kernel does the rest.)"""
    secret = f"executor-only-{os.urandom(8).hex()}"
    token = f"admin-token-{os.urandom(16).hex()}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRONOS_")},
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "CRONOS_KEY_PREFIX": settings.key_prefix,
        "CRONOS_NODE_ID": f"{settings.node_id}-env",
        "CRONOS_ALLOW_SHELL": "1",
        "CRONOS_ADMIN_TOKEN": token,
        "CRONOS_LOG_FORMAT": "json",
        "EXECUTOR_ONLY_SECRET": secret,
        "CRONOS_SHELL_USER": "nobody",
    }
    log = tmp_path / "executor.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *cronos_command(), "executor", env=env, cwd=tmp_path, stdout=out, stderr=asyncio.subprocess.STDOUT
        )
    try:
        argv = ["sh", "-c", _ENVIRONS, "sh", str(proc.pid)]
        job = await harness.job(kind="shell", payload={"argv": argv, "cwd": "/"})
        await harness.queue(job)

        async def ended() -> Run | None:
            runs = await harness.runs(job)
            return runs[0] if runs and runs[0].state in ("completed", "failed") else None

        run = await wait_for(ended, timeout=30, what=f"the run to end (executor log: {log})")
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
    assert run.result is not None, (run.error, log.read_text())
    for leaked in (secret, token, settings.database_url, "EXECUTOR_ONLY_SECRET", "DATABASE_URL"):
        assert leaked not in run.result, f"{leaked} read by the job: {run.result}"
    assert run.result.count("Permission denied") == 2, run.result  # both were tried


# --- the launcher in between keeps what the executor reported -----------------------------------


async def test_a_command_that_cannot_start_or_dies_of_a_signal_is_reported_as_before(
    harness: Harness, settings: Settings
) -> None:
    missing = await harness.job(kind="shell", payload={"argv": ["no-such-program-x"]})
    killed = await harness.job(kind="shell", payload={"argv": ["sh", "-c", "echo bye; kill -9 $$"]})
    for job in (missing, killed):
        await harness.queue(job)
    async with Executor(_shell_settings(settings)) as ex:
        await ex.run_once()
    (run,) = await harness.runs(missing)
    assert (run.state, run.error) == (
        "failed",
        "could not start 'no-such-program-x': [Errno 2] No such file or directory: 'no-such-program-x'",
    )
    (run,) = await harness.runs(killed)
    assert (run.state, run.error, run.result) == ("failed", "exit code -9", "exit -9\nstdout:\nbye\n\nstderr:\n")


_DIES = """
import os, subprocess, sys, time
from executor.kinds import shell
status_r, status_w = os.pipe()
argv = ["sh", "-c", f"echo $$ > {sys.argv[1]}; exec sleep 300"]
subprocess.Popen(shell.launcher_argv(argv, status_w, os.getpid(), None), pass_fds=(status_w,), start_new_session=True)
time.sleep(300)
"""


async def test_the_executors_death_ends_its_shell_runs(tmp_path: Path) -> None:
    """kill -9 of the executor: its launchers get SIGTERM (PR_SET_PDEATHSIG) and kill their runs,
    which would otherwise run on unowned while the run is retried elsewhere."""
    pidfile = tmp_path / "job.pid"
    executor = await asyncio.create_subprocess_exec(sys.executable, "-c", _DIES, str(pidfile))
    try:

        async def started() -> str:
            return _read(pidfile)

        job = int(await wait_for(started, timeout=10, what="the job to start"))
        executor.kill()
        await executor.wait()
        await _wait_gone(job, "the orphaned run's process")
    finally:
        with contextlib.suppress(ProcessLookupError):
            executor.kill()
        _kill_if_sleeping(pidfile)


async def test_a_job_that_kills_its_launcher_still_leaves_nothing(
    harness: Harness, settings: Settings, tmp_path: Path
) -> None:
    """The second line: a job of the executor's own user can SIGKILL its launcher; what it left
    holding the pipes is then found by the executor's /proc scan (its session, the pipes)."""
    pidfile = tmp_path / "left.pid"
    # Never the executor (this process) should the launcher be gone: the job would then hang to its timeout.
    kill = f'[ "$PPID" != {os.getpid()} ] && kill -9 $PPID'
    script = f"sh -c 'echo $$ > {pidfile}; exec sleep 300' & {_UNTIL.format(pidfile=pidfile)}; {kill}; wait"
    job = await harness.job(kind="shell", payload={"argv": ["sh", "-c", script]}, timeout_s=5)
    await harness.queue(job)
    try:
        async with Executor(_shell_settings(settings)) as ex:
            await ex.run_once()
        (run,) = await harness.runs(job)
        assert (run.state, run.error) == ("failed", "exit code -9")  # the launcher's own end, reported
        await _wait_gone(int(_read(pidfile)), "the process left by a job that killed its launcher")
    finally:
        _kill_if_sleeping(pidfile)


async def test_the_command_still_leads_its_own_process_group(harness: Harness, settings: Settings) -> None:
    """`kill -$$` (a script ending its own group) and `kill 0` keep working, and end the command alone."""
    jobs = [
        await harness.job(kind="shell", payload={"argv": ["sh", "-c", f"{kill}; sleep 5"]}, timeout_s=10)
        for kill in ("kill -TERM -$$", "kill -TERM 0")
    ]
    for job in jobs:
        await harness.queue(job)
    async with Executor(_shell_settings(settings)) as ex:
        await ex.run_once()
    for job in jobs:
        (run,) = await harness.runs(job)
        assert (run.state, run.error) == ("failed", "exit code -15"), (job, run.result)
