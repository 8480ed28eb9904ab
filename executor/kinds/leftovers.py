"""What is left of a shell run's processes when the run ends, and killing it: the second line
of defence, behind the launcher (a subreaper that kills its descendants, `launcher`), for
when the launcher itself was killed or is stuck.

A shell run's launcher leads its own session and process group. Its processes are:
- every process of that session (its group, and groups a job-control shell made in it);
- every descendant of the launcher, found by parent pid (this reaches a grandchild that left
  the session with `setsid` as long as its parent lives: once the parent exits, the
  orphan is re-parented and only the next rule can find it);
- every process holding one of the run's output pipes (a pipe's two ends share one
  inode, shown as `pipe:[inode]` in /proc/<pid>/fd): exactly the processes that would
  otherwise keep the run waiting for end of file, wherever they went;
- and their descendants.

They are found in /proc (Linux); elsewhere only the process group is killed. An escaped
process that let go of the pipes and whose parent is gone cannot be told apart from any
other process of the user: the launcher's subreaper keeps those its descendants, unless
the job killed the launcher (possible when it runs as the executor's user: CRONOS_SHELL_USER
prevents it); a cgroup (systemd-run --scope, a container) contains even that. Pids are
read then signalled, so a pid reused in between could be hit: the window is a few ms, and
only processes of the executor's own user can be signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

PROC = Path("/proc")


def kill_leftovers(leader: int, pipe_inodes: Collection[int] = (), *, thorough: bool) -> set[int]:
    """SIGKILL the process group of `leader`; when `thorough`, also everything `run_processes`
    finds (looked up before any signal, while parent links still hold). The pids found."""
    found = run_processes(leader, pipe_inodes) if thorough else set()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGKILL)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return found


def run_processes(leader: int, pipe_inodes: Collection[int] = ()) -> set[int]:
    """The live processes of the run led by `leader` (see the module docstring); never this one."""
    if not PROC.is_dir():
        return set()
    table = dict(_read_table())
    holders = set(_pipe_holders(table, pipe_inodes)) if pipe_inodes else set()
    return select(table, leader, holders) - {os.getpid()}


def select(table: Mapping[int, tuple[int, int]], leader: int, holders: Collection[int]) -> set[int]:
    """Pure: of `table` (pid -> (parent pid, session id)), the session of `leader`, its descendants,
    the `holders` and theirs."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = {pid for pid, (_, sid) in table.items() if sid == leader or pid == leader}
    found.update(pid for pid in holders if pid in table)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _read_table() -> Iterator[tuple[int, tuple[int, int]]]:
    """(pid, (parent pid, session id)) of every process /proc shows."""
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:  # gone meanwhile
            continue
        # After the command name (which may hold spaces and parentheses): state ppid pgrp session ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] in (b"Z", b"X"):  # a zombie holds nothing and cannot be killed again
            continue
        yield int(entry.name), (int(fields[1]), int(fields[3]))


def _pipe_holders(table: Mapping[int, object], pipe_inodes: Collection[int]) -> Iterator[int]:
    links = {f"pipe:[{inode}]" for inode in pipe_inodes}
    for pid in table:
        try:
            fds = os.listdir(PROC / str(pid) / "fd")
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                if os.readlink(PROC / str(pid) / "fd" / fd) in links:
                    yield pid
                    break
            except OSError:
                continue
