"""Run usage: what one run's work used, as the executor measured it (issue 39). Pure: no I/O.

| kind | wall_ms | cpu_ms | cpu_user_ms, cpu_sys_ms, max_rss_bytes |
|---|---|---|---|
| `shell` | the work's | the command's processes' user + system time | from their rusage |
| `task` | the work's | the executor thread's CPU while the task's own code ran | none |
| `http` | the work's | none (the request is the executor's I/O) | none |

`wall_ms` is the work alone (from the kind's start to its return, under the timeout), not the
recording around it (the run's `duration_ms`). A shell run's figures are its processes', read
by its launcher once every one of them was reaped (`RUSAGE_CHILDREN`: the launcher has no other
child): the command, what it started, what it orphaned. `max_rss_bytes` is the peak resident
memory of the largest of them (Linux counts the memory a process had before it ran the command,
so a tiny command shows the launcher's few megabytes). A task's CPU is measured in the thread
that runs its code: a plain function's worker thread CPU clock from its call to its return; for
an async function, the time its own steps held the event loop (each step timed: on the loop a step
runs without yielding, so it is CPU, or a blocking call made in it), so other runs sharing the
loop are not counted. What a task hands to other threads, processes or asyncio tasks is not.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """One run's usage, as stored (run_usage) and shown (a run's `usage`)."""

    wall_ms: float
    cpu_ms: float | None = None
    cpu_user_ms: float | None = None
    cpu_sys_ms: float | None = None
    max_rss_bytes: int | None = None


@dataclass(slots=True)
class Meter:
    """What a kind measured while the work ran (seconds and bytes); None where it measures nothing."""

    cpu_s: float | None = None
    cpu_user_s: float | None = None
    cpu_sys_s: float | None = None
    max_rss_bytes: int | None = None

    def usage(self, wall_s: float) -> Usage:
        return Usage(
            wall_ms=_ms_of(wall_s),
            cpu_ms=_ms(self.cpu_s),
            cpu_user_ms=_ms(self.cpu_user_s),
            cpu_sys_ms=_ms(self.cpu_sys_s),
            max_rss_bytes=self.max_rss_bytes,
        )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else _ms_of(seconds)


def _ms_of(seconds: float) -> float:
    """In milliseconds, to the microsecond (round(x, 3) costs a microsecond a call, a few a run)."""
    return int(seconds * 1_000_000 + 0.5) / 1000
