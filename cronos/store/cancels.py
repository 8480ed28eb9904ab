"""Cancel a run (the API's side): decided by cronos.lifecycle.cancel on the run's state, applied in
one transaction that holds the run's row.

A queued or waiting run ends `cancelled` at once (its token, if one is out, finds it not queued),
and, once that has committed, the first run waiting behind it is woken when nothing of its job
runs (waiters.wake_free: a woken run cancelled before it started leaves no one stranded); a run
woken with its concurrency group's slot frees it, handed to the group's next waiting run
(groups.release). A running run gets a request in `run_cancels` and a NOTIFY on `cronos_cancels`:
the executor running it hears it at once (`listen`), or at its next heartbeat, which reads the
request with the lease (the safety net for a notification missed: the LISTEN connection down, the
run not in hand yet); it stops the work and records the run `cancelled` (executor.cancels). Either
way the audit trail names who, in the same transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
import msgspec

from cronos import lifecycle
from cronos.errors import BackendUnavailable, Conflict, NotFound
from cronos.lifecycle import Cancel
from cronos.models import RunState
from cronos.store import groups
from cronos.store.audit import record
from cronos.store.db import connect_one, translate_errors
from cronos.store.jobs import MAX_ID, Guard, allow
from cronos.store.queries import groups as groups_q
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import runs as runs_q
from cronos.store.queries import upkeep as upkeep_q
from cronos.store.waiters import wake_free

log = logging.getLogger("cronos.store.cancels")


class CancelResult(msgspec.Struct, kw_only=True):
    run_id: int
    job_id: int
    was: str  # the state the request found: queued, waiting, reserved or running
    ended: bool  # cancelled at once; False: its executor was asked (running)
    requested_by: str  # who asked first (a repeated request keeps the first)


class CancelRequest(msgspec.Struct, frozen=True):
    """A notification on `cronos_cancels`: a running run someone asked to cancel."""

    run_id: int
    by: str


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(CancelRequest).decode


async def listen(
    dsn: str, on_request: Callable[[CancelRequest], None], stop: asyncio.Event, *, ping_s: float = 5.0
) -> None:
    """LISTEN on `cronos_cancels` until `stop`, telling `on_request` of each request. A dedicated
    connection, pinged every `ping_s` (an idle one never learns its peer is gone); raises
    BackendUnavailable when it is lost (the caller connects again; the heartbeat covers meanwhile)."""
    conn = await connect_one(dsn, timeout=ping_s, command_timeout=ping_s)
    lost = asyncio.Event()

    def notified(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            request = _decode(payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # not ours to read: the heartbeat still finds the request
        on_request(request)

    try:
        conn.add_termination_listener(lambda _conn: lost.set())
        with translate_errors():
            await conn.add_listener(notifications_q.CANCELS_CHANNEL, notified)
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), timeout=ping_s)
                except TimeoutError:
                    await conn.fetchval(upkeep_q.PING)
                if lost.is_set():
                    raise BackendUnavailable("postgresql", "the cancels' LISTEN connection was lost")
    finally:
        if not conn.is_closed():
            conn.terminate()


class CancelStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def cancel(self, run_id: int, *, actor: str, guard: Guard = allow) -> CancelResult:
        """Cancel run `run_id` for `actor`; NotFound, or Conflict when it has ended already. `guard`
        gets the run's job's kind first (403 for a shell job's run without admin)."""
        if run_id > MAX_ID:
            raise NotFound(f"run {run_id} not found")
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                job = await conn.fetchrow(runs_q.RUN_JOB_FOR_CANCEL, run_id)
                if job is None:
                    raise NotFound(f"run {run_id} not found")
                guard(job["kind"])
                group = job["concurrency_group"]
                if group is not None:  # the group before the run, as a claim takes them
                    await conn.fetch(groups_q.GROUPS_LOCK, [group])
                row = await conn.fetchrow(runs_q.RUN_LOCK_FOR_CANCEL, run_id)
                if row is None:
                    raise NotFound(f"run {run_id} not found")
                state = RunState(row["state"])
                decision = lifecycle.cancel(state)
                if decision is Cancel.ENDED:
                    raise Conflict(f"run {run_id} has ended ({state}): there is nothing to cancel")
                job_id, tick = row["job_id"], row["scheduled_for"]
                requested = await conn.fetchval(runs_q.RUN_CANCEL_REQUEST, run_id, job_id, tick, actor)
                first = requested is not None
                if decision is Cancel.NOW:
                    await conn.fetchval(runs_q.RUN_CANCEL, run_id, tick, lifecycle.cancelled_by(actor))
                    if group is not None:  # a run woken with a slot frees it: the group's next waiter gets it
                        await groups.release(conn, [run_id])
                by = actor if first else await self._requested_by(conn, run_id)
                if first and decision is Cancel.REQUEST:
                    await conn.execute(
                        notifications_q.NOTIFY_CANCEL, _encode(CancelRequest(run_id=run_id, by=actor)).decode()
                    )
                if first:  # a repeated request of a running run changes nothing: not audited again
                    detail = {"run_id": run_id, "state": state.value, "ended": decision is Cancel.NOW}
                    await record(conn, actor, "job", "run_cancelled", job_id=job_id, detail=detail)
        ended = decision is Cancel.NOW
        if ended:
            await self._wake_behind(job_id, run_id)
        result = CancelResult(run_id=run_id, job_id=job_id, was=state.value, ended=ended, requested_by=by)
        log.info(
            "run cancelled" if result.ended else "run cancel requested",
            extra={"event": "run.cancelled" if result.ended else "run.cancel_requested", "job_id": job_id,
                   "run_id": run_id, "actor": actor, "state": state.value},
        )  # fmt: skip
        return result

    async def _wake_behind(self, job_id: int, run_id: int) -> None:
        """Wake the first run waiting behind the cancelled one when nothing of its job runs, once the
        cancel has committed. Not in its transaction: there the wake's read of what runs (it waits for
        a finish of the job to commit) came after the cancel had locked its run, which that finish's own
        wake locks next: a deadlock. A wake lost here (PostgreSQL gone meanwhile) is the leader's
        waiter sweep's, as for a claim's."""
        try:
            with translate_errors():
                await wake_free(self._pool, [job_id])
        except BackendUnavailable as exc:
            log.warning(
                "run cancelled; waking the run behind it failed (the leader's sweep wakes it)",
                extra={"event": "run.cancel_wake_failed", "job_id": job_id, "run_id": run_id, "error": str(exc)},
            )

    @staticmethod
    async def _requested_by(conn: asyncpg.Connection, run_id: int) -> str:
        row = await conn.fetchrow(runs_q.RUN_CANCEL_OF, run_id)
        return str(row["requested_by"]) if row else ""
