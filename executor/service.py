"""The executor role: consume run tokens and run them (see `executor.pipeline`).

    async with Executor(settings, imports=["myapp.tasks"]) as executor:
        await executor.run()        # until stop(): then drain, record, release, ack

`run_once()` processes what the stream holds now and returns (tests, like arq's burst mode).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import aiohttp
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from cronos import presence
from cronos.backoff import Backoff
from cronos.errors import BackendUnavailable, ConfigError
from cronos.keys import Keys
from cronos.locks import acquire_many
from cronos.scripts import Scripts
from cronos.settings import Settings
from cronos.store.db import connect
from cronos.store.runs import ClaimedRun, Outcome, RunStore
from cronos.stream import RunStream
from executor import heartbeat, kinds
from executor.batcher import Batcher
from executor.consumer import REDIS_ERRORS, Consumer
from executor.pipeline import SKIPPED, Deps, Settle

log = logging.getLogger("cronos.executor")
T = TypeVar("T")


class Executor:
    name = "executor"

    def __init__(self, settings: Settings, imports: Sequence[str] = ()) -> None:
        self.settings = settings
        self.node_id = settings.node_id
        self._imports = list(imports)
        self._keys = Keys(settings.key_prefix)
        self._stack = contextlib.AsyncExitStack()
        self._stopping = asyncio.Event()
        self._deps: Deps | None = None
        self._consumer: Consumer | None = None
        self.store: RunStore | None = None

    # --- lifecycle ---

    async def __aenter__(self) -> Self:
        try:
            await self._open()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def _open(self) -> None:
        for module in self._imports:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ConfigError(f"--import {module}: {exc}") from exc
        settings = self.settings
        pool = await self._until_up("postgresql", lambda: connect(settings.database_url, min_size=1, max_size=6))
        self._stack.push_async_callback(pool.close)
        self._pool = pool
        client = aioredis.from_url(settings.redis_url)
        self._stack.push_async_callback(client.aclose)
        self._redis = client
        http = aiohttp.ClientSession()
        self._stack.push_async_callback(http.close)
        self._scripts = Scripts(client)
        self._stream = RunStream(client, self._keys)
        await self._until_up("redis", self._stream.ensure_group)
        store = self.store = RunStore(pool)
        # A backend's first claim statement is planned with cold caches (~30 ms here), all of it
        # start delay for the first burst: claim a run that does not exist (ids start at 1) now.
        await self._until_up("postgresql", lambda: store.claim([0], self.node_id, settings.run_lease_s))
        # A tick lock is taken up to the push lead before the run is claimed: its ttl covers both.
        lock_ttl_ms = settings.push_lead_ms + int(settings.run_lease_s * 1000)
        batchers: list[Batcher[Any, Any]] = [
            Batcher("locks", functools.partial(self._acquire_locks, lock_ttl_ms)),
            Batcher("claims", self._claim_batch),
            Batcher("finishes", self._finish_batch),
            Batcher("settles", self._settle_batch),
        ]
        for batcher in batchers:
            self._stack.push_async_callback(batcher.close)
        self._deps = Deps(
            node_id=self.node_id,
            keys=self._keys,
            lease_s=settings.run_lease_s,
            env=kinds.Env(settings, http),
            store=store,
            locks=batchers[0],
            claims=batchers[1],
            finishes=batchers[2],
            settles=batchers[3],
            lead_ms=settings.push_lead_ms,
        )
        self._consumer = Consumer(self._deps, self._stream, settings.executor_concurrency, self._probe)
        log.info(
            "executor ready",
            extra={"event": "executor.ready", "concurrency": settings.executor_concurrency, "imports": self._imports},
        )

    async def _until_up(self, backend: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Start even when a backend is not there yet: retry with capped backoff until it answers."""
        backoff = Backoff(base_s=0.2, cap_s=5.0)
        while True:
            try:
                return await attempt()
            except (BackendUnavailable, *REDIS_ERRORS) as exc:
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
        if self.store is not None:
            log.info(
                "executor closed",
                extra={"event": "executor.closed", "pg_round_trips": self.store.round_trips, **self.counts},
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
        return dict(self._consumer.outcomes) if self._consumer else {}

    async def run(self) -> None:
        await self._serve(burst=False)

    async def run_once(self) -> dict[str, int]:
        """Process every token available now (own pending first), wait for them, return counts."""
        await self._serve(burst=True)
        return self.counts

    async def _serve(self, *, burst: bool) -> None:
        assert self._consumer is not None and self._deps is not None, "use `async with Executor(...)`"
        consumer = self._consumer
        done = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            group.create_task(self._heartbeat_loop(done), name="executor:heartbeat")
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

    async def _heartbeat_loop(self, done: asyncio.Event) -> None:
        assert self._deps is not None
        interval = self.settings.run_lease_s / 3
        while not done.is_set():
            try:
                await heartbeat.beat(self._deps, self._scripts)
                await self._touch_entries()
                in_flight = len(self._deps.in_flight)
                await presence.beat(
                    self._redis,
                    self._keys,
                    "executor",
                    self.node_id,
                    self.settings.run_lease_s * 3,
                    in_flight=in_flight,
                    concurrency=self.settings.executor_concurrency,
                )
            except Exception as exc:  # noqa: BLE001 - a failed beat is retried at the next one
                log.warning("heartbeat failed: %s", exc, extra={"event": "executor.heartbeat_failed"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout=interval)

    async def _touch_entries(self) -> None:
        """Reset the idle time of the entries of runs still executing here, so other executors'
        XAUTOCLAIM (entries idle for two leases) leaves a long run's token alone."""
        assert self._deps is not None
        ids: list[Any] = [f.entry_id for f in self._deps.in_flight.values()]
        if ids:
            await self._redis.xclaim(
                self._stream.key, self._stream.group, self.node_id, min_idle_time=0, message_ids=ids, justid=True
            )

    # --- batched I/O behind the pipeline's steps ---

    async def _acquire_locks(self, lease_ms: int, keys: list[str]) -> list[bool]:
        return await acquire_many(self._scripts, keys, self.node_id, lease_ms)

    async def _claim_batch(self, run_ids: list[int]) -> list[ClaimedRun | str | None]:
        assert self.store is not None
        result = await self.store.claim(run_ids, self.node_id, self.settings.run_lease_s)
        claimed = {c.id: c for c in result.claimed}
        skipped = set(result.skipped)
        if result.replaced:
            log.info("older runs replaced", extra={"event": "run.replaced", "replaced": result.replaced})
        answers: list[ClaimedRun | str | None] = []
        for run_id in run_ids:  # a repeated id gets the run once
            answers.append(claimed.pop(run_id, None) or (SKIPPED if run_id in skipped else None))
            skipped.discard(run_id)
        return answers

    async def _finish_batch(self, outcomes: list[Outcome]) -> list[bool]:
        assert self.store is not None
        result = await self.store.finish(outcomes)
        return [o.run_id in result.written for o in outcomes]

    async def _settle_batch(self, items: list[Settle]) -> list[None]:
        pipe = self._redis.pipeline(transaction=False)
        keys = [i.lock_key for i in items if i.lock_key is not None]
        if keys:
            await self._scripts.release_many_if_owner(keys=keys, args=[self.node_id], client=pipe)
        entry_ids = [i.entry_id for i in items if i.entry_id is not None]  # None: given back, stays pending
        if entry_ids:
            pipe.xack(self._stream.key, self._stream.group, *entry_ids)
        try:
            await pipe.execute()
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # Redis lost the stream: there is nothing left to acknowledge (locks were released first).
        return [None] * len(items)

    async def _probe(self, backend: str) -> None:
        if backend == "redis":
            await self._redis.ping()
        else:
            await self._pool.fetchval("SELECT 1")
