"""Reserved runs recorded started (cronos.lifecycle Event.STARTED), a little after they start.

A run reserved ahead of its due time starts at its instant without a round trip; its start is
written afterwards, off the start path: half a second later for the runs still working then (one
statement for all of them), and by its finish for a run that ends first (FINISH_RUNS records its
started_at too), so a short run costs no statement more than a run claimed at its instant. Until
then the ledger shows it `reserved`, never `running` before it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime

from cronos.aio import wait_any
from cronos.errors import BackendUnavailable
from cronos.store.runs import ClaimedRun, RunStore

log = logging.getLogger("cronos.executor.starts")

RECORD_AFTER_S = 0.5  # a run still working this long after its start is recorded running


class Starts:
    def __init__(self, store: RunStore, node_id: str, after_s: float = RECORD_AFTER_S) -> None:
        self._store = store
        self._node_id = node_id
        self._after_s = after_s
        self._pending: dict[int, tuple[datetime, datetime]] = {}  # run id -> (started_at, scheduled_for)
        self._added = asyncio.Event()
        self.recorded = 0  # runs recorded started here (tests wait on it)

    def started(self, run: ClaimedRun) -> None:
        """A reserved run started: record it unless it ends first."""
        self._pending[run.id] = (run.started_at, run.scheduled_for)
        self._added.set()

    def ended(self, run_id: int) -> None:
        """Its finish records its start (Outcome.started_at)."""
        self._pending.pop(run_id, None)

    async def run(self, done: asyncio.Event) -> None:
        """The executor's side loop: record the runs that started at least `after_s` ago and still work."""
        while not done.is_set():
            await wait_any(done, self._added)
            self._added.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout=self._after_s)
            await self.flush()

    async def flush(self) -> None:
        runs, self._pending = self._pending, {}
        if not runs:
            return
        try:
            self.recorded += len(await self._store.start([(i, *v) for i, v in runs.items()], self._node_id))
        except BackendUnavailable as exc:  # their finish records them (or the reaper, lost)
            log.warning(
                "runs' start not recorded: %s", exc, extra={"event": "run.start_unrecorded", "count": len(runs)}
            )
