"""The asyncpg pool, schema migrations and the one place driver errors become CronosErrors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import socket
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import msgspec

from cronos.clock import SKEW_WARN_S, DbClock
from cronos.errors import BackendUnavailable, Contention, NotFound
from cronos.store.queries import upkeep as upkeep_q
from cronos.store.timestamps import decode_instant, encode_instant

log = logging.getLogger("cronos.store")

T = TypeVar("T")

# Any lock id will do as long as every Cronos process uses the same one.
MIGRATION_LOCK_ID = 0x43524F4E  # "CRON"

# Errors that mean "the database is not there right now" rather than "the SQL is wrong".
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    # Raised on a connection PostgreSQL killed mid-operation ("cannot ... connection is closed").
    asyncpg.exceptions.InternalClientError,
    ConnectionError,
    TimeoutError,
)


# SQLSTATE classes that mean "PostgreSQL is in trouble, try again": connection (08), resources
# (53), operator intervention such as a restart (57), and an idle-in-transaction timeout
# (25P03: this process was paused mid-transaction).
_UNAVAILABLE_SQLSTATES = ("08", "53", "57", "25P03")
# Transaction rollback (40): a deadlock or a serialization failure; the statement may simply be retried.
_CONTENTION_SQLSTATES = ("40",)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn driver errors that mean "not now" into BackendUnavailable (Contention for a
    deadlock or serialization failure), cause kept; SQL errors pass through unchanged."""
    try:
        yield
    except CONNECTION_ERRORS as exc:
        raise BackendUnavailable("postgresql", f"{type(exc).__name__}: {exc}") from exc
    except asyncpg.exceptions.InvalidCatalogNameError as exc:
        raise BackendUnavailable("postgresql", f"database missing: {exc}; run `cronos migrate`") from exc
    except asyncpg.exceptions.UndefinedTableError as exc:
        raise BackendUnavailable("postgresql", f"schema missing: {exc}; run `cronos migrate`") from exc
    except asyncpg.PostgresError as exc:
        sqlstate = str(exc.sqlstate or "")
        if sqlstate.startswith(_CONTENTION_SQLSTATES):
            raise Contention("postgresql", f"{type(exc).__name__}: {exc}") from exc
        if sqlstate.startswith(_UNAVAILABLE_SQLSTATES):
            raise BackendUnavailable("postgresql", f"{type(exc).__name__}: {exc}") from exc
        raise


async def ping(pool: asyncpg.Pool | asyncpg.Connection, timeout_s: float | None = None) -> float:
    """Raise BackendUnavailable unless PostgreSQL answers a trivial query (within `timeout_s`).
    Any refusal counts: a revoked login leaves the process without a database all the same.
    Returns PostgreSQL's clock as it answered (unix time)."""
    try:
        with translate_errors():
            async with asyncio.timeout(timeout_s):
                return float(await pool.fetchval(upkeep_q.PING))
    except asyncpg.PostgresError as exc:
        raise BackendUnavailable("postgresql", f"{type(exc).__name__}: {exc}") from exc


async def sync_clock(pool: asyncpg.Pool | asyncpg.Connection, clock: DbClock, timeout_s: float | None = None) -> None:
    """A ping that also measures this node's wall clock against PostgreSQL's (cronos.clock);
    logs when the node's clock is off by more than SKEW_WARN_S, and when it is not any more."""
    first, before = not clock.measured, clock.offset_s
    sent = clock.wall()
    db = await ping(pool, timeout_s)
    offset = clock.observe(sent, db, clock.wall())
    off = abs(offset) > SKEW_WARN_S
    if first or off != (abs(before) > SKEW_WARN_S):
        log.log(
            logging.WARNING if off else logging.INFO,
            "this node's clock is %+.3f s off PostgreSQL's: due times follow PostgreSQL's",
            -offset,
            extra={"event": "clock.offset", "offset_s": round(offset, 4)},
        )


PAGE_CHUNK_ROWS = 50  # rows a page of a job's history reads from PostgreSQL at a time


class PageBounds(msgspec.Struct, frozen=True):
    """How large a page of a job's history may grow (CRONOS_HISTORY_PAGE_MAX_BYTES) and the size past
    which a value in it is summarised (CRONOS_HISTORY_VALUE_MAX_BYTES)."""

    page_bytes: int
    value_bytes: int


def fits(taken: int, total: int, size: int, max_bytes: int) -> bool:
    """Whether a row of `size` bytes joins a page holding `taken` rows of `total` bytes: the
    first always does (a page is never empty while rows are left), the others within max_bytes."""
    return taken == 0 or total + size <= max_bytes


async def job_page(
    pool: asyncpg.Pool,
    cls: type[T],
    query: str,
    known: str,
    job_id: int,
    before: int | None,
    limit: int,
    bounds: PageBounds,
) -> tuple[list[T], bool]:
    """A page of a job's history as `cls` (`query`: $1 the job id, $2 before, $3 limit, $4 the value
    bound; each row with its `size`), read in chunks and ended before the row that would take it
    past `bounds.page_bytes`: a page's memory is bounded whatever its `limit`. With it, whether it
    ended there (more rows follow). NotFound only when `known` says the id never was a job (a
    deleted job keeps its history)."""
    rows: list[T] = []
    total, cut = 0, False
    with translate_errors():
        async with pool.acquire() as conn, conn.transaction(readonly=True):
            args = (job_id, before, limit, bounds.value_bytes)
            async for row in conn.cursor(query, *args, prefetch=PAGE_CHUNK_ROWS):
                if not fits(len(rows), total, row["size"], bounds.page_bytes):
                    cut = True
                    break
                rows.append(to_struct(row, cls))
                total += row["size"]
            if not rows and not await conn.fetchval(known, job_id):
                raise NotFound(f"job {job_id} not found")
    return rows, cut


async def close(pool: asyncpg.Pool, timeout_s: float = 1.0) -> None:
    """Close a pool within `timeout_s`, terminating what is left: a graceful close waits for every
    connection to be released, forever if one is stuck on a peer that stopped answering."""
    try:
        with translate_errors():
            async with asyncio.timeout(timeout_s):
                await pool.close()
    except BackendUnavailable:
        pool.terminate()


CONTENTION_ATTEMPTS = 5


async def retry_contention(work: Callable[[], Awaitable[T]], what: str) -> T:
    """Run `work` (one transaction) again when PostgreSQL rolled it back for a deadlock or a
    serialization failure: nothing of it was written, so running it again is safe."""
    for attempt in range(1, CONTENTION_ATTEMPTS + 1):
        try:
            return await work()
        except Contention as exc:
            if attempt == CONTENTION_ATTEMPTS:
                raise
            log.warning("%s rolled back, retrying: %s", what, exc, extra={"event": "db.contention", "attempt": attempt})
            await asyncio.sleep(random.uniform(0, 0.01 * attempt))  # apart, so the two sides do not meet again
    raise AssertionError("unreachable")


# Every statement on a pooled connection ends within this (asyncpg's `command_timeout`; a caller may
# pass its own `timeout`): a peer that stopped answering surfaces as BackendUnavailable in seconds,
# and asyncpg's cancel of the timed-out statement is bounded by it too (past it the connection is
# terminated instead of kept in the pool half-used).
COMMAND_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5.0
# A dead peer on an idle or busy connection (host gone, cable cut) is noticed by the kernel: keepalive
# probes after 5 s idle every 2 s, and TCP_USER_TIMEOUT bounds unacknowledged data. asyncpg sets
# neither (libpq's keepalives/tcp_user_timeout options have no asyncpg equivalent), so the
# connection class sets them on its socket.
KEEPALIVE_IDLE_S = 5
KEEPALIVE_INTERVAL_S = 2
KEEPALIVE_COUNT = 3
TCP_USER_TIMEOUT_MS = 10_000


def set_dead_peer_detection(sock: Any) -> None:
    """Keepalive and TCP_USER_TIMEOUT on a TCP socket (no-op for a Unix socket or an unknown platform)."""
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE_S),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
        ("TCP_USER_TIMEOUT", TCP_USER_TIMEOUT_MS),
    ):
        if (option := getattr(socket, name, None)) is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


# A timed-out statement is cancelled with a CancelRequest on a new connection; asyncpg bounds that
# by command_timeout, and a pool's release waits for it: on a dead link a failed statement would
# hold its caller twice as long. Past this the connection is terminated instead.
CANCEL_TIMEOUT_S = 1.0


class Connection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg is untyped here
    """An asyncpg connection whose socket detects a dead peer (see set_dead_peer_detection), and
    whose cancel of a timed-out statement gives up (terminates) after CANCEL_TIMEOUT_S."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with contextlib.suppress(OSError):
            set_dead_peer_detection(self._transport.get_extra_info("socket"))

    async def _cancel(self, waiter: Any, cancel_waiter: Any = None) -> None:
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT_S) as budget:
                await super()._cancel(waiter, cancel_waiter)
        except TimeoutError:
            self.terminate()
            return
        if budget.expired():  # asyncpg's _cancel swallows the cancellation the timeout sent
            self.terminate()


def _json_encode(value: Any) -> str:
    return msgspec.json.encode(value).decode()


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=_json_encode, decoder=msgspec.json.decode, schema="pg_catalog")
    await conn.set_type_codec(
        "timestamptz", encoder=encode_instant, decoder=decode_instant, schema="pg_catalog", format="tuple"
    )


async def connect(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    command_timeout: float | None = COMMAND_TIMEOUT_S,
    timeout: float = CONNECT_TIMEOUT_S,
    **kwargs: Any,
) -> asyncpg.Pool:
    """Open a pool with JSON codecs installed, a bound on every statement and on every connect, and
    dead-peer detection on its sockets; raises BackendUnavailable when PostgreSQL is down."""
    with translate_errors():
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            command_timeout=command_timeout,
            **_connection_options(timeout, kwargs),
        )
    assert pool is not None
    return pool


async def connect_one(dsn: str, *, timeout: float = CONNECT_TIMEOUT_S, **kwargs: Any) -> asyncpg.Connection:
    """One connection (dead-peer detection on; statements unbounded unless `command_timeout` is
    given: migrations may legitimately run long)."""
    with translate_errors():
        conn = await asyncpg.connect(dsn, **_connection_options(timeout, kwargs))
    await _init_connection(conn)
    return conn


def _connection_options(timeout: float, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The caller's options, and what every connection Cronos opens gets, pooled or alone: a bound
    on the connect and the Connection class (dead-peer detection, a cancel that gives up)."""
    return {**kwargs, "timeout": timeout, "connection_class": Connection}


def columns(items: Sequence[Any], fields: Sequence[str]) -> list[list[Any]]:
    """One array per field of `items`, in `fields`' order: a batch as a statement's unnest() takes it."""
    return [[getattr(item, name) for item in items] for name in fields]


def to_struct(row: Mapping[str, Any] | asyncpg.Record, cls: type[T]) -> T:
    """Map a row to a Struct; the one place rows become models."""
    return msgspec.convert(dict(row), cls, from_attributes=False, strict=False)


def mask_dsn(dsn: str) -> str:
    """The DSN with its password replaced, for logs and error messages."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _database_name(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/") or "postgres"


def _with_database(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))


def _migrations() -> list[tuple[int, str, str]]:
    found = []
    for entry in resources.files("cronos.store.migrations").iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append((int(match[1]), match[2], entry.read_text()))
    return sorted(found)


async def ensure_database(dsn: str) -> bool:
    """Create the DSN's database when missing; True when it was created here."""
    name = _database_name(dsn)
    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S)
    except asyncpg.exceptions.InvalidCatalogNameError:
        pass
    else:
        await conn.close()
        return False
    admin = await connect_one(_with_database(dsn, "postgres"))
    quoted = '"' + name.replace('"', '""') + '"'
    try:
        for attempt in range(50):
            try:
                await admin.execute(f"CREATE DATABASE {quoted}")
            except (asyncpg.exceptions.DuplicateDatabaseError, asyncpg.exceptions.UniqueViolationError):
                return False  # another process created it first (the race surfaces as either error)
            except asyncpg.exceptions.ObjectInUseError:
                # Another CREATE DATABASE is copying template1 right now; wait for it.
                await asyncio.sleep(0.05 * (attempt + 1))
                continue
            log.info("database created", extra={"event": "db.created", "database": name})
            return True
        raise BackendUnavailable("postgresql", f"could not create database {name!r}: template1 stayed busy")
    finally:
        await admin.close()


async def migrate(dsn: str, upto: int | None = None) -> list[int]:
    """Apply missing migrations (those numbered up to `upto`, if given: tests of a migration on
    data written before it); idempotent and safe when several processes run it at once."""
    with translate_errors():
        await ensure_database(dsn)
        conn = await connect_one(dsn)
    applied: list[int] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_ID)
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for version, name, sql in _migrations():
                if version in done or (upto is not None and version > upto):
                    continue
                async with conn.transaction():
                    await conn.execute(sql)
                    await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name)
                applied.append(version)
                log.info("migration applied", extra={"event": "db.migrated", "version": version, "migration": name})
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_ID)
    finally:
        await conn.close()
    return applied
