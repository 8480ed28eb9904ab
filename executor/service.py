"""The executor role: consume run tokens and run them (see `executor.pipeline`).

    async with Executor(settings, imports=["myapp.tasks"]) as executor:
        await executor.run()        # until stop(): then drain, record, release, ack

`run_once()` processes what the stream holds now and returns (tests, like arq's burst mode).
This module only opens resources, wires the steps (`executor.deps`) and supervises the
consumer and the heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Self, TypeVar

from cronos import redis_client
from cronos.backoff import Backoff
from cronos.clock import DbClock
from cronos.errors import BackendUnavailable, ConfigError
from cronos.keys import Keys
from cronos.locks import TickLocks
from cronos.run_output import Bounds
from cronos.scripts import Scripts
from cronos.settings import Settings
from cronos.store import run_output
from cronos.store.db import connect
from cronos.store.identity import database_id
from cronos.store.runs import RunStore
from cronos.stream import RunStream
from executor import cancels, heartbeat, kinds, leaving
from executor.consumer import Consumer
from executor.deps import Deps, wire
from executor.health import BackendHealth, probe_backoff
from executor.host_limits import HostLimiter
from executor.http_client import guarded_session
from executor.kinds import shell
from executor.output import Writer, install
from executor.tracing import open_tracer

log = logging.getLogger("cronos.executor")
T = TypeVar("T")


def importable_cwd() -> None:
    """Task modules are imported from the current directory, as `python -m`, celery and rq do: a
    console script's sys.path starts at its own bin folder, so `cronos executor --import
    myapp.tasks` run from the app's folder found no `myapp`."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


class Executor:
    name = "executor"

    def __init__(
        self, settings: Settings, imports: Sequence[str] = (), *, probe_backoff: Callable[[], Backoff] = probe_backoff
    ) -> None:
        self.settings = settings
        self._probe_backoff = probe_backoff  # while a backend is away (tests pass a faster one)
        self.node_id = settings.node_id
        self._imports = list(imports)
        self._stack = contextlib.AsyncExitStack()
        self._stopping = asyncio.Event()
        self.deps: Deps | None = None
        self.consumer: Consumer | None = None
        self.output: Writer | None = None

    async def __aenter__(self) -> Self:
        try:
            await self._open()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def _open(self) -> None:
        if self._imports:
            importable_cwd()
        for module in self._imports:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ConfigError(f"--import {module}: {exc}") from exc
        settings = self.settings
        shell.prepare(settings)  # non-dumpable; a warning when shell jobs would run as root
        keys = Keys(settings.key_prefix)
        # A transaction left open by an executor cut from PostgreSQL mid-statement would keep its
        # row locks (a job's G3 row, the chain lock) and stall every other executor's claims and
        # heartbeats behind them; PostgreSQL ends it after a lease, when its runs are reaped anyway.
        in_transaction_ms = str(int(max(settings.run_lease_s, 1.0) * 1000))
        pool = await self._until_up(
            "postgresql",
            lambda: connect(
                settings.database_url,
                min_size=1,
                max_size=6,
                server_settings={
                    "idle_in_transaction_session_timeout": in_transaction_ms,
                    "application_name": "cronos-executor",
                },
            ),
        )
        self._stack.push_async_callback(pool.close)
        client = self._redis = redis_client.connect(settings.redis_url)
        self._stack.push_async_callback(client.aclose)
        # The SSRF guard pins every connection. A connection per execution slot: the hosts' limits
        # (executor.host_limits) bound each target, not a pool that one slow host could fill.
        http = guarded_session(settings.http_allow_nets, limit=settings.executor_concurrency)
        self._stack.push_async_callback(http.close)
        scripts = Scripts(client)
        stream = RunStream(client, keys, scripts, queues=settings.executor_queues)  # only these queues' jobs
        await self._until_up("redis", stream.ensure_group)
        store = RunStore(pool)
        tracer = None
        if settings.traces:  # a run's trace is derived from the cluster id (cronos.traces)
            tracer = open_tracer(settings, await self._until_up("postgresql", lambda: database_id(pool)))
            self._stack.push_async_callback(tracer.close)  # after the drain: the last runs' spans go out
        self._stack.enter_context(install())  # runs' print()s and log records to their output
        output = self.output = Writer(
            functools.partial(run_output.write, pool), Bounds(settings.output_max_lines, settings.output_max_bytes)
        )
        # A backend's first claim statement is planned with cold caches (~30 ms here), all of it
        # start delay for the first burst: claim a run that does not exist (ids start at 1) now.
        await self._until_up("postgresql", lambda: store.claim([0], self.node_id, settings.run_lease_s))
        clock = DbClock()  # due times are judged by PostgreSQL's clock, measured at start and every heartbeat
        await self._until_up("postgresql", lambda: store.sync_clock(clock))
        health = BackendHealth({"redis": client.ping, "postgresql": store.ping}, self._probe_backoff)
        deps = self.deps = wire(
            node_id=self.node_id,
            keys=keys,
            lease_s=settings.run_lease_s,
            lead_ms=settings.push_lead_ms,
            env=kinds.Env(settings, http, HostLimiter(settings.http_host_limits), output),
            store=store,
            stream=stream,
            tick_locks=TickLocks(scripts, self.node_id),
            health=health,
            clock=clock,
            redis=client,
            concurrency=settings.executor_concurrency,
            cancel_grace_s=settings.cancel_grace_s,
            reserve_ahead=settings.reserve_ahead,
            tracer=tracer,
        )
        deps.env.hosts.slots = deps.gate  # a run waiting for its host lends its execution slot back
        for batcher in deps.batchers:
            self._stack.push_async_callback(batcher.close)
        self.consumer = Consumer(deps, settings.executor_prefetch)
        log.info(
            "executor ready",
            extra={
                "event": "executor.ready",
                "concurrency": settings.executor_concurrency,
                "imports": self._imports,
                "queues": list(settings.executor_queues),
            },
        )

    async def _until_up(self, backend: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Start even when a backend is not there yet: retry with capped backoff until it answers."""
        backoff = Backoff(base_s=0.2, cap_s=5.0)
        while True:
            try:
                return await attempt()
            except BackendUnavailable as exc:
                if self._stopping.is_set():
                    raise
                delay = backoff.next_delay()
                log.warning(
                    "%s unavailable at start, retrying in %.1f s: %s",
                    backend,
                    delay,
                    exc,
                    extra={"event": "backend.waiting", "backend": backend},
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), timeout=delay)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.deps is not None:
            log.info(
                "executor closed",
                extra={"event": "executor.closed", "pg_round_trips": self.deps.store.round_trips, **self.counts},
            )
        await self._stack.aclose()

    def stop(self) -> None:
        """Start the graceful drain: stop reading, finish or cancel in-flight runs, exit."""
        if not self._stopping.is_set():
            log.info("executor draining", extra={"event": "executor.draining"})
        self._stopping.set()

    @property
    def counts(self) -> dict[str, int]:
        """How tokens ended here so far: completed, failed, skipped, lock_denied, not_queued, lost..."""
        return {str(k): v for k, v in self.consumer.outcomes.items()} if self.consumer else {}

    async def run(self) -> None:
        await self._serve(burst=False)

    async def run_once(self) -> dict[str, int]:
        """Process every token available now (own pending first), wait for them, return counts."""
        await self._serve(burst=True)
        return self.counts

    async def _serve(self, *, burst: bool) -> None:
        assert self.consumer is not None and self.deps is not None, "use `async with Executor(...)`"
        consumer = self.consumer
        done = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            beats = heartbeat.run(self.deps, self._redis, self.settings.executor_concurrency, done)
            group.create_task(beats, name="executor:heartbeat")
            group.create_task(cancels.listen(self.deps, self.settings.database_url, done), name="executor:cancels")
            if self.output is not None:
                group.create_task(self.output.run(done), name="executor:output")
            try:
                await consumer.serve(group, self._stopping, burst=burst)
                cancelled = await consumer.drain(self.settings.drain_timeout_s if not burst else 3600)
                if cancelled:
                    log.warning(
                        "drain deadline passed", extra={"event": "executor.drain_cancelled", "count": cancelled}
                    )
            finally:
                done.set()
        if self._stopping.is_set():
            log.info("executor drained", extra={"event": "executor.drained", **self.counts})
            # The heartbeat has ended: nothing writes the presence again once it is gone.
            await leaving.leave(
                self._redis, self.deps.keys, self.node_id, self.deps.stream.queues, self.settings.executor_prefetch
            )
