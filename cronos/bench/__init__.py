"""`cronos bench dispatch|run|e2e|schedule|apscheduler|compare|herd|million|ledger|overload`: benchmarks (all
but schedule and apscheduler on real PostgreSQL, and Redis where the roles run).

    dispatch     the leader alone: burst throughput, steady lag, election -> first push, idle CPU
    run          executors alone: runs inserted and pushed by the bench, runs/s and start delay
    e2e          api + dispatcher + executors, jobs registered over REST, run at their defaults
    schedule     next-fire calls/s of cronos.schedule against cronsim, in-process, per common form
    apscheduler  an in-process APScheduler 3 measured as e2e measures Cronos (the `bench` extra)
    compare      apscheduler, then e2e, in the same sitting: side by side with ratios
    herd         N jobs on one schedule: how fast the cluster starts the herd at its tick
    million      a million registered jobs: the leader's memory and tick writes, the API's pages
    ledger       PostgreSQL's CPU per run for the ledger's writes alone (tick write, claim, finish)
    overload     offered 1x, 2x, 4x capacity, then relieved: runs/s, CPU per run, fairness, recovery

Each benchmark but ledger drives the roles as `cronos` processes on a database and key prefix of its
own, so it never imports a role package (import-linter: `cronos` imports no role).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from cronos.settings import Settings

BENCHMARKS = ("dispatch", "run", "e2e", "schedule", "apscheduler", "compare", "herd", "million", "ledger", "overload")


def main(which: str, settings: Settings, argv: Sequence[str]) -> int:
    """Run benchmark `which` with its own command-line arguments; the exit status."""
    if which not in BENCHMARKS:
        raise ValueError(f"no benchmark {which!r}; one of {', '.join(BENCHMARKS)}")
    module = importlib.import_module(f"cronos.bench.{which}")
    return int(module.main(settings, argv))
