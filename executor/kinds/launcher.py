"""A shell run's launcher: the process between the executor and the job's command.

    python -I -S launcher.py STATUS_FD GRACE_S PARENT_PID UID GID GROUPS -- ARGV...

The executor starts it with the job's environment only (`shell.child_env`), so the job's
parent, /proc/$PPID/environ, holds nothing of the executor's. It is a script of the
standard library alone (`-I -S`: no site-packages, no PYTHON* variable read), run by path.

It makes itself a child subreaper (Linux, prctl PR_SET_CHILD_SUBREAPER): whatever the command
starts and orphans -- `setsid -f`, a daemon's double fork -- is re-parented to it instead of to
init, so every process of the run stays its descendant. It starts the command in a process
group of its own, in the launcher's session (as UID:GID with GROUPS when they are not -1:
CRONOS_SHELL_USER; the launcher keeps its own user, so the job cannot signal it), waits for it,
gives what the command left running GRACE_S to finish (PIPE_GRACE_S: a background writer),
then SIGKILLs every descendant and reaps it. SIGUSR1 (a cancel's signal) sends SIGTERM to the
command's process group, so it may stop cleanly within the cancel's grace. SIGTERM (the
executor's timeout, the end of a cancel's grace, or a drain)
and the executor's death (PR_SET_PDEATHSIG) skip straight to the kill. It exits after the last
descendant is gone.

What it has to say goes to STATUS_FD: one line, `exit N` (the command's exit code, -signal
when a signal ended it, as asyncio reports it), or `error MESSAGE` when the command could not
be started (the OSError's text); then `usage USER_S SYS_S MAXRSS_KIB`, what its descendants used
(getrusage RUSAGE_CHILDREN once every one was reaped: the launcher has no other child, so these
are the run's alone, without the launcher's own).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time
import warnings  # noqa: F401  os.execvp imports it: here, before the user switch (the stdlib may be unreadable to that user)

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_WAIT_S = 2.0  # how long to keep killing and reaping descendants before giving up (EPERM, D state)
POLL_S = 0.005


class _Stop(Exception):
    """SIGTERM: stop waiting and kill."""


_command = 0  # the command's pid (and process group) once started


def _on_usr1(signum: int, frame: object) -> None:
    """A cancel: ask the command's process group to stop (the executor kills it after the grace)."""
    if _command:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(_command, signal.SIGTERM)


def _on_term(signum: int, frame: object) -> None:
    raise _Stop


def prctl(option: int, value: int) -> bool:
    """prctl(2); False where it failed or does not exist (not Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        return bool(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0)
    return False


def descendants(me: int) -> list[int]:
    """Every live process below `me`, parents before their children, from /proc."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [me]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> bool:
    """Reap every child that has ended; False once no child is left (nothing below us at all:
    an orphan would have been re-parented here)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def kill_all(me: int) -> None:
    """SIGKILL every descendant and reap, until none is left (or KILL_WAIT_S passed)."""
    deadline = time.monotonic() + KILL_WAIT_S
    while True:
        for pid in descendants(me):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not _reap() or time.monotonic() > deadline:
            return
        time.sleep(POLL_S)


def spawn(argv: list[str], ids: tuple[int, int, list[int]] | None) -> int:
    """fork and exec `argv` (PATH from this environment) in a process group of its own (so a
    script's `kill -$$` and `kill 0` end the command, not the launcher), as `ids` (uid, gid,
    groups) when given. Its pid; an OSError worded as subprocess words it when exec failed.
    (Not subprocess: its import alone doubled the launcher's start time and private memory.)"""
    errors_r, errors_w = os.pipe()  # close-on-exec: end of file and nothing else once exec worked
    pid = os.fork()
    if pid == 0:
        try:
            os.close(errors_r)
            os.setpgid(0, 0)
            # exec keeps what Python ignores, and a handler becomes the default
            for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGUSR1):
                signal.signal(signum, signal.SIG_DFL)
            if ids is not None:
                uid, gid, groups = ids
                os.setgroups(groups)
                os.setgid(gid)
                os.setuid(uid)
            os.execvp(argv[0], argv)
        except Exception as exc:  # noqa: BLE001  whatever it is, the parent must hear of it
            reason = f"[Errno {exc.errno}] {exc.strerror}" if isinstance(exc, OSError) else repr(exc)
            with contextlib.suppress(OSError):
                os.write(errors_w, reason.encode(errors="replace"))
        finally:
            os._exit(127)
    os.close(errors_w)
    with os.fdopen(errors_r, "rb") as errors:
        reason = errors.read().decode(errors="replace")
    if reason:
        os.waitpid(pid, 0)
        raise OSError(f"{reason}: {argv[0]!r}")
    return pid


def _wait(pid: int) -> int:
    """Reap children (orphans re-parented here too) until `pid` ends; its exit code."""
    while True:
        done, status = os.waitpid(-1, 0)
        if done == pid:
            return os.waitstatus_to_exitcode(status)


def _linger(grace_s: float) -> None:
    """Let what the command left running finish within `grace_s`."""
    deadline = time.monotonic() + grace_s
    while _reap() and time.monotonic() < deadline:
        time.sleep(POLL_S)


def main(args: list[str]) -> int:
    status_fd, grace, parent, uid, gid, groups, dashes, *argv = args
    assert dashes == "--" and argv, "usage: see the module docstring"
    global _command
    me = os.getpid()
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGUSR1, _on_usr1)
    prctl(PR_SET_CHILD_SUBREAPER, 1)  # elsewhere than Linux: the executor's own scan is all there is
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    line = "exit -15"
    try:
        if os.getppid() != int(parent):  # the executor died before PDEATHSIG was set
            raise _Stop
        os.set_inheritable(int(status_fd), False)  # the command does not get it
        ids = None if int(uid) < 0 else (int(uid), int(gid), _ints(groups))
        try:
            child = _command = spawn(argv, ids)
        except OSError as exc:
            line = f"error {exc}"
        else:
            line = f"exit {_wait(child)}"
            _command = 0  # reaped: its pid (and group id) may be another's soon
            _linger(float(grace))
    except _Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        kill_all(me)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    line += f"\nusage {used.ru_utime:.6f} {used.ru_stime:.6f} {used.ru_maxrss}"
    with contextlib.suppress(OSError):
        os.write(int(status_fd), f"{line}\n".encode(errors="replace"))
    return 0


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
