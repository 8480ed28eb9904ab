"""Capturing a run's output on the executor, and writing it in batches (cronos/run_output.py).

Runs share one event loop (and a task's plain function runs in a thread that copies the run's
context), so what a run writes is routed by a context variable, never by a global redirect:
`sys.stdout` and `sys.stderr` are wrapped once (`install`), and a handler on the root logger
takes each record logged inside a run's context (its `ctx.logger`, any library it calls). Outside
a run both pass through untouched. Shell and http runs add their lines through `current()`.

A run's capture costs nothing until it writes its first line: only then does the `Writer` see it.
The writer flushes every run's pending lines together, in one transaction (at most FLUSH_S after
they were written, sooner past FLUSH_BYTES), and each run's last lines when it ends, before its
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

from cronos.run_output import LINE_BYTES, Bounded, Bounds, Stream
from cronos.store.run_output import Written

log = logging.getLogger("cronos.executor")

FLUSH_S = 0.25  # a line waits at most this long to be written (live tail)
FLUSH_BYTES = 256 * 1024  # ... or less, once this much is pending
END_WAIT_S = 5.0  # a run's outcome waits this long at most for its last lines to be written
IDLE_S = 1.0  # with no run writing, the writer only looks for the end of its role this often

_current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("cronos_run_output", default=None)


def current() -> Capture | None:
    """The capture of the run this code runs for; None outside a run."""
    return _current.get()


class Capture:
    """One run's output while it runs (a context manager: inside it, the run's code writes here);
    lines may come from its thread too (a lock). Nothing but this object until a first line."""

    __slots__ = ("_bounded", "_decoders", "_ended", "_lock", "_partial", "_pending_bytes", "_token", "_writer",
                 "run_id", "secrets", "tick")  # fmt: skip

    def __init__(self, writer: Writer, run_id: int, tick: datetime, secrets: tuple[str, ...]) -> None:
        self.run_id, self.tick, self.secrets, self._writer = run_id, tick, secrets, writer
        self._bounded: Bounded | None = None  # made at the first line
        self._lock = threading.Lock()
        self._partial: dict[Stream, str] = {}
        self._decoders: dict[Stream, codecs.IncrementalDecoder] = {}
        self._pending_bytes = 0
        self._ended: asyncio.Future[None] | None = None
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
        return self._bounded is None and not self._partial

    def line(self, stream: Stream, text: str) -> None:
        """One whole line (a log record, an http response's status)."""
        with self._lock:
            self._add(time.time(), stream, text)

    def write(self, stream: Stream, text: str) -> None:
        """Text as written to a stream: whole lines kept, the rest held until its newline (or the end)."""
        with self._lock:
            text = self._partial.pop(stream, "") + text
            *lines, rest = text.split("\n")
            if len(rest) >= LINE_BYTES:  # no newline for that long: taken as a line, memory stays bounded
                lines.append(rest)
                rest = ""
            if lines:
                self._add_many(time.time(), stream, lines)
            if rest:
                self._partial[stream] = rest

    def feed(self, stream: Stream, data: bytes) -> None:
        """Bytes from a pipe (a shell run), decoded as UTF-8 across chunks."""
        decoder = self._decoders.get(stream)
        if decoder is None:
            decoder = self._decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        self.write(stream, decoder.decode(data))

    def _add(self, at: float, stream: Stream, text: str) -> None:
        self._add_many(at, stream, [text])

    def _add_many(self, at: float, stream: Stream, texts: list[str]) -> None:
        bounded = self._bounded
        if bounded is None:
            bounded = self._bounded = Bounded(self._writer.bounds, self.secrets)
        if bounded.bounds.off:
            return
        first = not bounded.next_seq
        bounded.add_many(at, stream, texts)
        self._pending_bytes += sum(map(len, texts))
        if first:
            self._writer.watch(self)
        elif self._pending_bytes >= FLUSH_BYTES:
            self._writer.wake()

    def take(self) -> Written | None:
        with self._lock:
            if self._bounded is None or not self._bounded.pending:
                return None
            self._pending_bytes = 0
            return Written(self.run_id, self.tick, self._bounded.take(time.time()))

    def _end(self) -> bool:
        """Lines still held end here; whether anything was ever written."""
        with self._lock:
            for stream, decoder in self._decoders.items():
                if rest := decoder.decode(b"", final=True):
                    self._partial[stream] = self._partial.get(stream, "") + rest
            partial, self._partial = self._partial, {}
            for stream, rest in partial.items():
                self._add(time.time(), stream, rest)
            return self._bounded is not None and self._bounded.next_seq > 0


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
        if not capture._end():
            return
        ended = capture._ended = asyncio.get_running_loop().create_future()
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
        batch = [w for w in (c.take() for c in live) if w is not None]
        ended = [c for c in live if c._ended is not None]
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
                if capture._ended is not None and not capture._ended.done():
                    capture._ended.set_result(None)


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
