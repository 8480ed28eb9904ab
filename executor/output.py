"""Capturing a run's output on the executor, and writing it in batches (cronos/run_output.py).

Runs share one event loop (and a task's plain function runs in a thread that copies the run's
context), so what a run writes is routed by a context variable, never by a global redirect:
`sys.stdout` and `sys.stderr` are wrapped once (`install`), and a handler on the root logger
takes each record logged inside a run's context (its `ctx.logger`, any library it calls). Outside
a run both pass through untouched. Shell and http runs add their lines through `current()`.

A run's capture is one object until it writes its first line: only then does the `Writer` see it.
The writer flushes every run's pending lines together, in one transaction (at most FLUSH_S after
they were written, sooner past FLUSH_BYTES of a head; past it, a run's tail window every
TAIL_FLUSH_S, made at the flush), and each run's last lines when it ends, before its
outcome is recorded: once a run has ended, its whole output is there to read. Output is best
effort: a flush PostgreSQL refuses is logged and dropped, never holding up the run or stopping the
executor.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import contextvars
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any, TextIO

from cronos.run_output import Bounded, Bounds, Stream
from cronos.store.run_output import Written

log = logging.getLogger("cronos.executor")

FLUSH_S = 0.25  # a line waits at most this long to be written (live tail)
FLUSH_BYTES = 256 * 1024  # ... or less, once this much of a head is pending
TAIL_FLUSH_S = 1.0  # past its head, a running run's tail window is written this often at most
END_WAIT_S = 5.0  # a run's outcome waits this long at most for its last lines to be written
IDLE_S = 1.0  # with no run writing, the writer only looks for the end of its role this often

_current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("cronos_run_output", default=None)


def current() -> Capture | None:
    """The capture of the run this code runs for; None outside a run."""
    return _current.get()


class Capture:
    """One run's output while it runs (a context manager: inside it, the run's code writes here).
    Nothing but this object until a first line: then its `_Live` state, lines from the run's
    thread too (a lock)."""

    __slots__ = ("_live", "_token", "_writer", "run_id", "secrets", "tick")

    def __init__(self, writer: Writer, run_id: int, tick: datetime, secrets: tuple[str, ...]) -> None:
        self.run_id, self.tick, self.secrets, self._writer = run_id, tick, secrets, writer
        self._live: _Live | None = None
        self._token: contextvars.Token[Capture | None] | None = None

    def __enter__(self) -> Capture:
        self._token = _current.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)

    @property
    def silent(self) -> bool:
        """Nothing written, not even a part of a line: nothing to end (the common run's fast path)."""
        return self._live is None

    def line(self, stream: Stream, text: str) -> None:
        """One whole line (a log record, an http response's status)."""
        live = self._live or self._open()
        with live.lock:
            live.bounded.add(time.time(), stream, text)
            self._grew(live, len(text))

    def write(self, stream: Stream, text: str) -> None:
        """Text as written to a stream: whole lines kept, the rest held until its newline (or the end)."""
        live = self._live or self._open()
        with live.lock:
            live.bounded.write(time.time(), stream, text)
            self._grew(live, len(text))

    def feed(self, stream: Stream, data: bytes) -> None:
        """Bytes from a pipe (a shell run), decoded as UTF-8 across chunks."""
        live = self._live or self._open()
        decoder = live.decoders.get(stream)
        if decoder is None:
            decoder = live.decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        self.write(stream, decoder.decode(data))

    def _open(self) -> _Live:
        """The first line: the run's buffer, and the writer starts watching it (once, whichever
        thread writes first)."""
        with _opening:
            live = self._live
            if live is None:
                live = self._live = _Live(Bounded(self._writer.bounds, self.secrets))
                if not live.bounded.bounds.off:
                    self._writer.watch(self)
        return live

    def _grew(self, live: _Live, size: int) -> None:
        """Flush early once the head pending is large; past the head a run's pending lines are its
        tail window at most, written at the writer's pace."""
        if live.bounded.cut_seq is None:
            live.pending_chars += size
            if live.pending_chars >= FLUSH_BYTES:
                live.pending_chars = 0
                self._writer.wake()

    def take(self, now: float) -> Written | None:
        """What to write now (monotonic `now`). Past its head, a run still running writes its tail
        window every TAIL_FLUSH_S at most: a run printing on at its pipe's pace would otherwise
        write, then delete, a whole window of rows every flush."""
        live = self._live
        if live is None:
            return None
        with live.lock:
            if not live.bounded.pending:
                return None
            if live.ended is None and live.bounded.cut_seq is not None and now - live.taken_at < TAIL_FLUSH_S:
                return None
            live.pending_chars, live.taken_at = 0, now
            return Written(self.run_id, self.tick, live.bounded.take(time.time()))

    def _end(self) -> bool:
        """Lines still held end here; whether anything was ever written."""
        live = self._live
        if live is None:
            return False
        with live.lock:
            for stream, decoder in live.decoders.items():
                if rest := decoder.decode(b"", final=True):
                    live.bounded.write(time.time(), stream, rest)
            live.bounded.end(time.time())
            return live.bounded.wrote


class _Live:
    """A capture's state from its first line on."""

    __slots__ = ("bounded", "decoders", "ended", "lock", "pending_chars", "taken_at")

    def __init__(self, bounded: Bounded) -> None:
        self.bounded = bounded
        self.lock = threading.Lock()
        self.decoders: dict[Stream, codecs.IncrementalDecoder] = {}
        self.pending_chars = 0
        self.taken_at = 0.0  # monotonic: when its lines were last taken to be written
        self.ended: asyncio.Future[None] | None = None


_opening = threading.Lock()  # a capture's first line, from its run's task or its thread


class Writer:
    """Flushes the pending output of every run that wrote, together, while `run` runs."""

    def __init__(self, write: Callable[[list[Written]], Awaitable[None]], bounds: Bounds) -> None:
        self._write = write
        self.bounds = bounds
        self._live: dict[int, Capture] = {}  # id(capture) -> capture, from the first line to the end
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0

    def capturing(self, run_id: int, tick: datetime, secrets: tuple[str, ...]) -> Capture:
        """Within `with`, what the code writes goes to the run's capture."""
        return Capture(self, run_id, tick, secrets)

    async def end(self, capture: Capture) -> None:
        """The run ended: wait until its last lines are written, at most END_WAIT_S: the outcome is
        recorded whatever became of the output (even when this task is cancelled meanwhile, by a
        drain). A run that wrote nothing (`Capture.silent`) need not come here."""
        if not capture._end() or capture._live is None:
            return
        ended = capture._live.ended = asyncio.get_running_loop().create_future()
        self.wake()
        try:
            await asyncio.wait([ended], timeout=END_WAIT_S)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()

    def watch(self, capture: Capture) -> None:
        with self._lock:
            self._live[id(capture)] = capture
        self.wake()

    def wake(self) -> None:
        """Flush now (from the loop's thread or a task's own)."""
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._thread:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    async def run(self, done: asyncio.Event) -> None:
        """Flush when woken, and every FLUSH_S while a run that wrote is going, until `done`;
        then once more."""
        self._loop, self._thread = asyncio.get_running_loop(), threading.get_ident()
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), FLUSH_S if self._live else IDLE_S)
            self._wake.clear()
            await self.flush()
        await self.flush()

    async def flush(self) -> None:
        with self._lock:
            live = list(self._live.values())
        ended = [c for c in live if c._live is not None and c._live.ended is not None]
        now = time.monotonic()
        batch = [w for w in (c.take(now) for c in live) if w is not None]
        try:
            if batch:
                await self._write(batch)
        except Exception as exc:  # noqa: BLE001 - output is best effort: it never stops the executor
            log.warning("run output not written: %s", exc, extra={"event": "output.write_failed", "runs": len(batch)})
        finally:
            with self._lock:
                for capture in ended:
                    self._live.pop(id(capture), None)
            for capture in ended:
                future = capture._live.ended if capture._live is not None else None
                if future is not None and not future.done():
                    future.set_result(None)


class _Routed:
    """A stream that sends what a run writes to its capture, and the rest where it went before."""

    def __init__(self, stream: Stream, original: TextIO) -> None:
        self._stream, self.original = stream, original

    def write(self, text: str) -> int:
        capture = _current.get()
        if capture is None:
            return self.original.write(text)
        capture.write(self._stream, text)
        return len(text)

    def flush(self) -> None:
        if _current.get() is None:
            self.original.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...: the original's
        return getattr(self.original, name)


class _RunLogs(logging.Handler):
    """Each record logged inside a run, as a line of its output (stream `log`)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def handle(self, record: logging.LogRecord) -> bool:  # no lock: a capture has its own
        capture = _current.get()
        if capture is not None:
            try:
                capture.line("log", self.format(record))
            except Exception:  # noqa: BLE001 - a record that cannot be formatted: logging's own report
                self.handleError(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:  # pragma: no cover - handle() does it all
        pass


_installed: list[int] = [0]  # executors serving in this process (tests run several)


@contextlib.contextmanager
def install() -> Iterator[None]:
    """Route runs' stdout, stderr and log records to their captures while an executor serves (once
    per process). The task loggers (`ctx.logger`, cronos.task.*) take INFO whatever the process's level."""
    _installed[0] += 1
    if _installed[0] > 1:
        try:
            yield
        finally:
            _installed[0] -= 1
        return
    handler = _RunLogs()
    root, tasks = logging.getLogger(), logging.getLogger("cronos.task")
    saved = sys.stdout, sys.stderr, tasks.level
    sys.stdout, sys.stderr = _Routed("stdout", sys.stdout), _Routed("stderr", sys.stderr)
    if tasks.level == logging.NOTSET or tasks.level > logging.INFO:
        tasks.setLevel(logging.INFO)
    root.addHandler(handler)
    try:
        yield
    finally:
        _installed[0] -= 1
        root.removeHandler(handler)
        sys.stdout, sys.stderr, level = saved
        tasks.setLevel(level)
