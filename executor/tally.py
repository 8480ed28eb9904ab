"""How many runs this executor started: its share of the work, for the operator.

Counted once per claim batch (not per run): the total goes to
`cronos_executor_runs_started_total{node}` and, with the count over the last WINDOW_S and the
time of the last claim, to the node's presence at each heartbeat (cronos.presence.RunCounts), where
the cluster page shows every executor's runs and share. An idle healthy executor then shows an old
last claim beside a fresh heartbeat; a stuck one shows no claim while its peers' counts grow.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

from cronos import metrics
from cronos.presence import RunCounts
from cronos.store.runs import Claim, ClaimedRun

WINDOW_S = 300.0  # the cluster page's "runs in the last 5 minutes"


class Tally:
    def __init__(self, node_id: str, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock  # unix time
        self._counter = metrics.EXECUTOR_RUNS_STARTED.labels(node=node_id)
        self.started = 0
        self.claimed_at: float | None = None
        # (unix time, runs started by then), a sample per heartbeat: the oldest is the window's base.
        self._samples: deque[tuple[float, int]] = deque([(clock(), 0)])

    def count(self, claims: Sequence[Claim]) -> None:
        """One claim batch's answers: those claimed were started here."""
        started = sum(isinstance(c, ClaimedRun) for c in claims)
        if started:
            self.started += started
            self.claimed_at = self._clock()
            self._counter.inc(started)

    def counts(self) -> RunCounts:
        """Now: the total, and the runs started since the newest sample at least WINDOW_S old (or
        since the start, for a node younger than the window)."""
        now = self._clock()
        samples = self._samples
        samples.append((now, self.started))
        while len(samples) > 1 and samples[1][0] <= now - WINDOW_S:
            samples.popleft()
        since, base = samples[0]
        return RunCounts(self.started, self.started - base, max(now - since, 0.0), self.claimed_at)
