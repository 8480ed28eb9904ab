"""Run output, bounded: the lines one run (one attempt) wrote, numbered from 0, each with its
instant and stream, kept within the run's bound of lines and bytes. Pure: no I/O, no clock.

Within the bound every line is kept. Past it the first half stays (the head, written as it
comes), the last half is kept as a moving window (the tail), and one line between them, at
the number after the head's last, states plainly how many lines and bytes were cut. While the
run goes on, lines that leave the tail window are either never written (still pending) or
deleted from what was (`Pending.trim`): readers following a long run see its newest lines, and
storage never holds more than the bound (plus one flush of lines).

A line is at most LINE_BYTES of UTF-8 (cut and marked past it), holds no NUL (PostgreSQL's
text cannot) and is scrubbed of the run's secret values (cronos.redact.scrub) before it is
kept: no secret reaches a buffer, the database or a reader.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from cronos.redact import scrub

Stream = Literal["log", "stdout", "stderr", "http", "cut"]
STREAMS: tuple[Stream, ...] = ("log", "stdout", "stderr", "http", "cut")
LINE_BYTES = 8192  # one line at most; a longer one is cut, the cut marked


@dataclass(frozen=True, slots=True)
class Bounds:
    """A run's bound (CRONOS_OUTPUT_MAX_LINES, CRONOS_OUTPUT_MAX_BYTES): half for the head, half
    for the tail. Zero keeps nothing."""

    max_lines: int
    max_bytes: int

    @property
    def off(self) -> bool:
        return self.max_lines <= 0 or self.max_bytes <= 0

    @property
    def head_lines(self) -> int:
        return self.max_lines - self.max_lines // 2

    @property
    def head_bytes(self) -> int:
        return self.max_bytes - self.max_bytes // 2


@dataclass(frozen=True, slots=True)
class Line:
    seq: int
    at: float  # unix time
    stream: Stream
    text: str


@dataclass(frozen=True, slots=True)
class Pending:
    """What one flush writes for a run: lines (a repeated seq replaces the stored line: the cut
    line's count grows) and the stored lines [trim[0], trim[1]) to delete (left the tail)."""

    lines: list[Line]
    trim: tuple[int, int] | None


def cut_text(lines: int, size: int) -> str:
    """The line that stands for what a bound cut out."""
    return f"[cronos] {lines} lines ({size} bytes) cut here: past the output's bound, its first and last lines are kept"


def fit(text: str, secrets: tuple[str, ...]) -> tuple[str, int]:
    """A line as kept: secrets scrubbed, NUL replaced, at most LINE_BYTES; with its size in bytes."""
    text = scrub(text, secrets) if secrets else text
    if "\0" in text:
        text = text.replace("\0", "\N{REPLACEMENT CHARACTER}")
    raw = text.encode("utf-8", "replace")
    if len(raw) <= LINE_BYTES:
        return text, len(raw)
    kept = raw[:LINE_BYTES].decode("utf-8", "ignore")
    text = f"{kept}…[{len(raw) - LINE_BYTES} more bytes]"
    return text, len(text.encode())


@dataclass(slots=True)
class Bounded:
    """One run's output as it is written: `add` each line, `take` what to write now."""

    bounds: Bounds
    secrets: tuple[str, ...] = ()
    next_seq: int = 0
    head_lines: int = 0
    head_bytes: int = 0
    cut_seq: int | None = None  # set once past the head: the cut line's number
    cut_lines: int = 0
    cut_bytes: int = 0
    _head: list[Line] = field(default_factory=list)  # pending head lines
    _tail: deque[tuple[int, int]] = field(default_factory=deque)  # (seq, bytes) of the tail window
    _tail_bytes: int = 0
    _pending_tail: deque[Line] = field(default_factory=deque)
    _stored_from: int = 0  # stored tail lines below this are deleted (or were never written)
    _trim_to: int = 0
    _cut_changed: bool = False

    @property
    def pending(self) -> bool:
        return bool(self._head or self._pending_tail or self._cut_changed or self._trim_to > self._stored_from)

    def add(self, at: float, stream: Stream, text: str) -> None:
        if self.bounds.off:
            return
        text, size = fit(text, self.secrets)
        bounds = self.bounds
        if self.cut_seq is None and self.head_lines < bounds.head_lines and self.head_bytes + size <= bounds.head_bytes:
            self._head.append(Line(self.next_seq, at, stream, text))
            self.next_seq += 1
            self.head_lines += 1
            self.head_bytes += size
            return
        if self.cut_seq is None:
            self.cut_seq = self.next_seq
            self.next_seq += 1
            self._stored_from = self._trim_to = self.next_seq
        line = Line(self.next_seq, at, stream, text)
        self.next_seq += 1
        self._tail.append((line.seq, size))
        self._pending_tail.append(line)
        self._tail_bytes += size
        tail_lines, tail_bytes = bounds.max_lines - bounds.head_lines, bounds.max_bytes - bounds.head_bytes
        while self._tail and (len(self._tail) > tail_lines or self._tail_bytes > tail_bytes):
            self._evict()

    def add_many(self, at: float, stream: Stream, texts: list[str]) -> None:
        """`add` each of `texts`; past the head, those the tail window would drop at once are only
        counted (a shell job printing 10 MB costs its tail's lines, not its 200,000)."""
        done = 0
        while done < len(texts) and self.cut_seq is None and not self.bounds.off:
            self.add(at, stream, texts[done])
            done += 1
        skip = len(texts) - done - (self.bounds.max_lines - self.bounds.head_lines)
        if skip > 0 and not self.bounds.off:
            while self._tail:  # the whole window leaves too
                self._evict()
            self.cut_lines += skip
            self.cut_bytes += len("\n".join(texts[done : done + skip]).encode("utf-8", "replace")) - (skip - 1)
            self.next_seq += skip
            self._cut_changed = True
            done += skip
        for text in texts[done:]:
            self.add(at, stream, text)

    def _evict(self) -> None:
        """The tail window's oldest line leaves it: cut, and deleted if it was written."""
        seq, gone = self._tail.popleft()
        self._tail_bytes -= gone
        self.cut_lines += 1
        self.cut_bytes += gone
        self._cut_changed = True
        if self._pending_tail and self._pending_tail[0].seq == seq:
            self._pending_tail.popleft()  # never written
        else:
            self._trim_to = seq + 1

    def take(self, at: float) -> Pending:
        """The lines to write now (head and tail lines not yet written, the cut line when its count
        changed, stamped `at`) and the stored range that left the tail window."""
        lines = self._head
        self._head = []
        if self._cut_changed and self.cut_seq is not None:
            lines.append(Line(self.cut_seq, at, "cut", cut_text(self.cut_lines, self.cut_bytes)))
            self._cut_changed = False
        lines.extend(self._pending_tail)
        self._pending_tail.clear()
        trim = None
        if self._trim_to > self._stored_from:
            trim = (self._stored_from, self._trim_to)
            self._stored_from = self._trim_to
        return Pending(lines, trim)
