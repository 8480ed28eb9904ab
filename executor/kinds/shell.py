"""`shell` runs: an argv list (never a shell string), off unless the operator allows it.

An executor without CRONOS_ALLOW_SHELL=1 never claims a shell job's token: it hands it to one that
allows shell, or leaves the run queued (executor.routing). The refusal in `run` is for a token of
an older leader, which does not say it is a shell job's.

Environment. The child never sees the executor's environment (it holds DATABASE_URL and
the like). It gets `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME` (the home of the user it
runs as), `LANG=C.UTF-8` (whatever the executor's locale: output reads the same on every
node), then the job's own `env` on top (which may change HOME and LANG). A job's env may
not set PATH (it also picks the program argv[0] names), LD_* or PYTHON*, nor use a name
that is empty or holds `=` or NUL, nor a value with NUL: the API refuses such a job, and
one stored before that check fails here naming the key, before anything starts.

User. The executor's own, unless CRONOS_SHELL_USER names another (the executor must then
run as root). A job of the executor's user could read /proc/<executor>/environ, so the
executor makes itself non-dumpable (`prepare`): then only root can, and a root executor
without a shell user logs a warning at start.

Launcher. The child is started through `executor.kinds.launcher`, with the child's
environment: the job's parent, /proc/$PPID/environ, holds nothing of the executor's. The
launcher is a child subreaper: what the command orphans (`setsid -f`, a daemon's double
fork) stays its descendant, and it kills every descendant before it exits.

Output. stdout and stderr are read as they arrive, at the pipe's pace (the child never
blocks on a full pipe), and each is kept only as far as the stored excerpt needs: its
first and last result_max_bytes / 2 (`Capture`); what lies between is counted and
dropped, so the executor's memory stays flat whatever the child prints.

Usage. The launcher reports what the run's processes used once it reaped the last of them (CPU
user and system time, the largest one's peak resident memory: cronos.run_usage), in its status.

Ending. The launcher leads its own session and process group; the command leads a process
group of its own in that session (so `kill -$$` and `kill 0` in a script end the command). The run
ends when the launcher exits and its pipes reach end of file. After the command exits,
what it left running (a background writer, one that escaped with `setsid`) gets
PIPE_GRACE_S (0.5 s) to finish, then the launcher SIGKILLs it and the run ends, by the
command's exit code. A cancel first asks (the launcher gets SIGUSR1 and sends SIGTERM to the
command's process group); its grace over, the run is killed as at a timeout. At a timeout, a drain
or lost ownership the run ends at once: the
launcher gets SIGTERM and SIGKILLs every process of the run (no SIGTERM to them first: a
run past its deadline has had its time); and so when the executor dies (PR_SET_PDEATHSIG).
So a job cannot leave a process behind (a daemon belongs to a service manager). Should the
launcher be gone or stuck (a job of the executor's own user can kill it), the executor
SIGKILLs its process group and, when the launcher was still running or the pipes still
held, everything `leftovers` finds in /proc (its session, its descendants, whoever holds
its pipes; a scan of a few ms, only in those cases). Then the pipes are closed and the
launcher reaped (REAP_WAIT_S).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from cronos.errors import ConfigError
from cronos.payloads import ShellPayload
from cronos.run_usage import Meter
from cronos.settings import Settings
from cronos.store.runs import ClaimedRun
from cronos.tasks import Cancellation
from executor import output
from executor.kinds import leftovers
from executor.kinds.base import Capture, Env, RunFailed
from executor.kinds.launcher import prctl

log = logging.getLogger("cronos.executor")

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
LANG = "C.UTF-8"
PIPE_GRACE_S = 0.5  # after the child exits, how long a process still holding its pipes may write
REAP_WAIT_S = 2.0  # after SIGKILL, how long to wait for the child's exit before closing anyway
STDOUT, STDERR = 1, 2
PR_SET_DUMPABLE = 4
LAUNCHER = str(Path(__file__).with_name("launcher.py"))
HOME = os.path.expanduser("~")  # the executor's user's home (from HOME, else the password database)


def env_refusal(env: Mapping[str, str]) -> str | None:
    """Why a job's `env` may not be used, naming the key; None when it may. Pure."""
    for key, value in env.items():
        if not key or "=" in key or "\0" in key:
            return f"env key {key!r} is not a valid variable name (empty, or holds '=' or NUL)"
        if key == "PATH" or key.startswith(("LD_", "PYTHON")):
            return f"env key {key!r} may not be set by a job (PATH, LD_* and PYTHON* are refused)"
        if "\0" in value:
            return f"env value of {key!r} holds a NUL byte"
    return None


def child_env(env: Mapping[str, str], home: str) -> dict[str, str]:
    """The child's whole environment: the fixed base, then the job's own `env`. Pure."""
    return {"PATH": SAFE_PATH, "HOME": home, "LANG": LANG, **env}


@dataclass(frozen=True, slots=True)
class RunAs:
    """The user shell jobs run as (CRONOS_SHELL_USER)."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str


def run_as(name: str) -> RunAs | None:
    """The user `name` names; None when it is empty or the executor's own user (no switch)."""
    if not name:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise RunFailed(f"CRONOS_SHELL_USER {name!r} is not a user on this host") from None
    if entry.pw_uid == os.geteuid():
        return None
    return RunAs(entry.pw_uid, entry.pw_gid, tuple(os.getgrouplist(name, entry.pw_gid)), entry.pw_dir)


def prepare(settings: Settings) -> None:
    """At the executor's start, when shell jobs are allowed. The executor becomes non-dumpable: a
    process of its user (a shell job) can then neither read /proc/<executor>/environ nor ptrace it;
    root still can, so a root executor should name CRONOS_SHELL_USER (a warning says so)."""
    if not settings.allow_shell:
        return
    try:
        user = run_as(settings.shell_user)
    except RunFailed as exc:
        raise ConfigError(exc.message) from None
    if user is not None and os.geteuid() != 0:
        raise ConfigError(f"CRONOS_SHELL_USER: only a root executor can run jobs as {settings.shell_user!r}")
    prctl(PR_SET_DUMPABLE, 0)
    if user is None and os.geteuid() == 0:
        log.warning(
            "shell jobs run as root: they can read the executor's secrets in /proc; set CRONOS_SHELL_USER",
            extra={"event": "executor.shell_as_root"},
        )


def launcher_argv(argv: Sequence[str], status_fd: int, parent: int, user: RunAs | None) -> list[str]:
    """The launcher's command line (see executor.kinds.launcher). Pure."""
    ids = [str(user.uid), str(user.gid), ",".join(map(str, user.groups))] if user else ["-1", "-1", ""]
    return [sys.executable, "-I", "-S", LAUNCHER, str(status_fd), str(PIPE_GRACE_S), str(parent), *ids, "--", *argv]


async def run(run: ClaimedRun, env: Env, cancellation: Cancellation, meter: Meter) -> str | None:
    if not env.settings.allow_shell:
        raise RunFailed("shell jobs are disabled on this executor (set CRONOS_ALLOW_SHELL=1 to allow them)")
    try:
        payload = msgspec.convert(run.payload, ShellPayload)
    except msgspec.ValidationError as exc:
        raise RunFailed(f"invalid shell payload: {exc}") from exc
    refusal = env_refusal(payload.env)
    if refusal is not None:
        raise RunFailed(refusal)
    user = run_as(env.settings.shell_user)
    loop = asyncio.get_running_loop()
    limit = env.settings.result_max_bytes
    status_r, status_w = os.pipe()
    try:
        try:
            transport, child = await loop.subprocess_exec(
                lambda: _Child(loop, limit, output.current()),
                *launcher_argv(payload.argv, status_w, os.getpid(), user),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=payload.cwd,
                env=child_env(payload.env, user.home if user else HOME),  # the launcher's too: $PPID's
                start_new_session=True,
                pass_fds=(status_w,),
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL in argv or cwd
            raise RunFailed(f"could not start {payload.argv[0]!r}: {exc}") from exc
        finally:
            os.close(status_w)
        try:
            await _exited(transport, child, cancellation)
            await asyncio.wait([child.drained], timeout=PIPE_GRACE_S)
        finally:
            await _end(transport, child)
        status, _, used = _status(status_r).partition("\n")
    finally:
        os.close(status_r)
    read_rusage(used, meter)
    if status.startswith("error "):
        raise RunFailed(f"could not start {payload.argv[0]!r}: {status.removeprefix('error ')}")
    code = int(status.removeprefix("exit ")) if status.startswith("exit ") else transport.get_returncode()
    stdout, stderr = (child.output[fd].excerpt() for fd in (STDOUT, STDERR))
    result = f"exit {code}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    if code != 0:
        raise RunFailed(f"exit code {code}", result=result)
    return result


async def _exited(transport: asyncio.SubprocessTransport, child: _Child, cancellation: Cancellation) -> None:
    """Until the launcher exits; a cancel meanwhile has it ask the command to stop (SIGUSR1)."""
    asked = asyncio.ensure_future(cancellation.event.wait())
    ends: list[asyncio.Future[Any]] = [child.exited, asked]
    try:
        await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
        if not child.exited.done():
            with contextlib.suppress(ProcessLookupError):
                os.kill(transport.get_pid(), signal.SIGUSR1)
            await child.exited
    finally:
        asked.cancel()


def _status(fd: int) -> str:
    """The launcher's lines (written before it exited); empty when it was killed first."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 65536).decode(errors="replace").strip()
    except BlockingIOError:
        return ""


def read_rusage(line: str, meter: Meter) -> None:
    """`meter` filled from the launcher's `usage USER_S SYS_S MAXRSS_KIB` line; nothing from a line
    of another shape (a launcher killed before it wrote one). Pure."""
    parts = line.split()
    if len(parts) != 4 or parts[0] != "usage":
        return
    try:
        user_s, sys_s, rss_kib = float(parts[1]), float(parts[2]), int(parts[3])
    except ValueError:
        return
    meter.cpu_user_s, meter.cpu_sys_s, meter.cpu_s = user_s, sys_s, user_s + sys_s
    meter.max_rss_bytes = rss_kib * 1024  # Linux's ru_maxrss is in KiB


class _Child(asyncio.SubprocessProtocol):
    """Feeds the pipes into their captures (the result's excerpt, and the run's output line by line);
    tells when the child exited and when both pipes ended."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int, lines: output.Capture | None) -> None:
        self.output = {STDOUT: Capture(limit), STDERR: Capture(limit)}
        self.lines = lines
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self._open = {STDOUT, STDERR}

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        raw = data if isinstance(data, bytes) else data.encode()
        self.output[fd].feed(raw)
        if self.lines is not None:
            self.lines.feed("stdout" if fd == STDOUT else "stderr", raw)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.drained.done():
            self.drained.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _end(transport: asyncio.SubprocessTransport, child: _Child) -> None:
    """Kill what is left, close the pipes, reap the child (see the module docstring)."""
    if not child.exited.done():  # SIGTERM: the launcher kills and reaps every process of the run, then exits
        with contextlib.suppress(ProcessLookupError):
            os.kill(transport.get_pid(), signal.SIGTERM)
        await asyncio.wait([child.exited], timeout=REAP_WAIT_S)
        if child.exited.done():  # the pipes end with it, unless a process it lost holds them
            await asyncio.wait([child.drained], timeout=PIPE_GRACE_S)
    stuck = not child.exited.done()  # the launcher's pid is still its own: a scan by it is safe
    held = [inode for inode in (_open_pipe_inode(transport, fd) for fd in (STDOUT, STDERR)) if inode]
    leftovers.kill_leftovers(transport.get_pid(), held, thorough=stuck or bool(held))
    for fd in (STDOUT, STDERR):  # the readers stop now, even if an unkillable process holds the pipes
        pipe = transport.get_pipe_transport(fd)
        if pipe is not None:
            pipe.close()
    try:
        if not child.exited.done():  # close() before the exit is reported would reap behind the child watcher's back
            await asyncio.wait([child.exited], timeout=REAP_WAIT_S)
    finally:
        transport.close()


def _open_pipe_inode(transport: asyncio.SubprocessTransport, fd: int) -> int | None:
    """The inode of our end of pipe `fd` while it is still open (a pipe's ends share it)."""
    pipe = transport.get_pipe_transport(fd)
    if pipe is None or pipe.is_closing():
        return None
    try:
        return os.fstat(pipe.get_extra_info("pipe").fileno()).st_ino
    except (OSError, ValueError, AttributeError):  # closed meanwhile
        return None
