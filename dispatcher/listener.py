"""LISTEN on the API's job channel; each notification wakes the tick loop.

A dedicated connection (a pooled one could be handed to someone else). When it drops,
`run` raises BackendUnavailable: the leader stops leading, and after reconnecting does a
full resync, which covers any notification sent while nobody listened. An idle LISTEN
connection never learns that its peer stopped answering, so it is pinged every
`ping_interval_s`, each ping within `ping_timeout_s`; `on_ping` is told of each that
completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import msgspec

from cronos.clock import DbClock
from cronos.errors import BackendUnavailable
from cronos.store.db import connect_one, sync_clock, translate_errors
from cronos.store.queries.notifications import JOBS_CHANNEL

log = logging.getLogger("dispatcher.listener")


class Change(msgspec.Struct):
    op: str = ""
    job_id: int | None = None


_decode = msgspec.json.Decoder(Change).decode


def parse(payload: str) -> Change:
    """A notification payload; anything unreadable asks for a full resync (op "")."""
    try:
        return _decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Change()


class Listener:
    def __init__(
        self,
        dsn: str,
        on_change: Callable[[Change], None],
        *,
        ping_interval_s: float = 5.0,
        ping_timeout_s: float = 5.0,
        on_ping: Callable[[], None] = lambda: None,
        clock: DbClock | None = None,
    ) -> None:
        self._dsn = dsn
        self._on_change = on_change
        self._ping_interval_s = ping_interval_s
        self._ping_timeout_s = ping_timeout_s
        self._on_ping = on_ping  # a round trip completed (the leader's proof that PostgreSQL answers)
        self._clock = clock or DbClock()  # measured against PostgreSQL's at every ping
        self.ready = asyncio.Event()

    async def run(self) -> None:
        lost = asyncio.Event()
        conn = await connect_one(self._dsn, timeout=self._ping_timeout_s, command_timeout=self._ping_timeout_s)
        try:

            def notified(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
                self._on_change(parse(payload))

            conn.add_termination_listener(lambda _conn: lost.set())
            with translate_errors():  # a raw connection: no store translates for it
                await conn.add_listener(JOBS_CHANNEL, notified)
            await sync_clock(conn, self._clock, self._ping_timeout_s)  # before the first tick is planned
            self.ready.set()
            self._on_ping()
            while not lost.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._ping_interval_s):
                        await lost.wait()
                if not lost.is_set():
                    await sync_clock(conn, self._clock, self._ping_timeout_s)  # raises BackendUnavailable
                    self._on_ping()
            raise BackendUnavailable("postgresql", "the LISTEN connection was lost")
        finally:
            self.ready.clear()
            if not conn.is_closed():
                conn.terminate()
