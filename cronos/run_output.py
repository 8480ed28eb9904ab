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
kept: no secret reaches the database or a reader.

What it costs is what is kept, not what is written. Text written to a stream (`write`) is
split into lines only while the head fills; past it, whole lines wait as the blocks they came
in, counted (`str.count`), until a flush (`take`) makes lines of the newest the tail window can
hold: the lines before them are cut by number and size alone, never split, scrubbed or encoded
(a shell job printing 10 MB costs its tail's lines, not its 200,000). A line is only ever
scrubbed whole, so a secret split across two writes (two pipe reads) is scrubbed like any other;
a stream written without a newline is taken a line at a time past LINE_BYTES characters, keeping
back the characters a secret could still be the start of.
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


def _size(text: str) -> int:
    """Bytes of `text` as UTF-8; an ASCII text (its flag is kept by CPython) is not encoded."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))


@dataclass(frozen=True, slots=True)
class _Block:
    """Whole lines past the head, as written: `text` is `lines` lines joined by newlines (`whole`:
    one line, newlines and all: a log record)."""

    at: float
    stream: Stream
    text: str
    lines: int
    whole: bool = False


@dataclass(slots=True)
class Bounded:
    """One run's output as it is written: `add` a line or `write` a stream's text, `take` what to
    write now, `end` when the run ends (a last line without its newline)."""

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
    _partial: dict[Stream, str] = field(default_factory=dict)  # a stream's text after its last newline
    _blocks: deque[_Block] = field(default_factory=deque)  # past the head, not yet lines
    _block_lines: int = 0
    _block_chars: int = 0

    @property
    def pending(self) -> bool:
        return bool(
            self._head or self._blocks or self._pending_tail or self._cut_changed or self._trim_to > self._stored_from
        )

    @property
    def wrote(self) -> bool:
        """Whether any line was written (kept or cut)."""
        return self.next_seq > 0 or bool(self._blocks)

    @property
    def _tail_lines(self) -> int:
        return self.bounds.max_lines - self.bounds.head_lines

    def add(self, at: float, stream: Stream, text: str) -> None:
        """One whole line (a log record, an http response's status), newlines and all."""
        if self.bounds.off or (self.cut_seq is None and self._to_head(at, stream, text)):
            return
        self._queue(_Block(at, stream, text, 1, whole=True))

    def write(self, at: float, stream: Stream, text: str) -> None:
        """Text as written to a stream: its whole lines kept, the rest held until its newline (or
        `end`); held past LINE_BYTES characters, it is taken as a line."""
        if self.bounds.off:
            return
        held = self._partial.pop(stream, None)
        if held is not None:
            text = held + text
        end = text.rfind("\n")
        rest = text[end + 1 :] if end >= 0 else text
        if end >= 0:
            self._lines(at, stream, text[:end])
        if len(rest) >= LINE_BYTES:  # memory stays bounded, and no part of a secret leaves early
            rest = scrub(rest, self.secrets) if self.secrets else rest
            keep = max(map(len, self.secrets), default=1) - 1  # the longest start of a secret
            if len(rest) > keep:
                self._lines(at, stream, rest[: len(rest) - keep])
                rest = rest[len(rest) - keep :] if keep else ""
        if rest:
            self._partial[stream] = rest

    def end(self, at: float) -> None:
        """The run ended: what each stream held without a newline is its last line."""
        partial, self._partial = self._partial, {}
        for stream, rest in partial.items():
            self._lines(at, stream, rest)

    def _lines(self, at: float, stream: Stream, text: str) -> None:
        """`text` as lines (split at its newlines): into the head while it has room, then queued."""
        start = 0
        while self.cut_seq is None:
            end = text.find("\n", start)
            if not self._to_head(at, stream, text[start:] if end < 0 else text[start:end]):
                break
            if end < 0:
                return
            start = end + 1
        rest = text[start:] if start else text
        self._queue(_Block(at, stream, rest, rest.count("\n") + 1))

    def _to_head(self, at: float, stream: Stream, text: str) -> bool:
        """Keep the line in the head if it has room; else the head is over: the cut line's number."""
        kept, size = fit(text, self.secrets)
        bounds = self.bounds
        if self.head_lines < bounds.head_lines and self.head_bytes + size <= bounds.head_bytes:
            self._head.append(Line(self.next_seq, at, stream, kept))
            self.next_seq += 1
            self.head_lines += 1
            self.head_bytes += size
            return True
        self.cut_seq = self.next_seq
        self.next_seq += 1
        self._stored_from = self._trim_to = self.next_seq
        return False

    def _queue(self, block: _Block) -> None:
        """Past the head: a block waits for the next `take`. The oldest blocks that the newer ones
        push out of the tail by their number of lines alone are cut at once; a flush's worth of long
        lines is made into lines early, so memory stays bounded."""
        self._blocks.append(block)
        self._block_lines += block.lines
        self._block_chars += len(block.text)
        blocks, tail_lines = self._blocks, self._tail_lines
        while len(blocks) > 1 and self._block_lines - blocks[0].lines >= tail_lines:
            gone = blocks.popleft()
            self._block_lines -= gone.lines
            self._block_chars -= len(gone.text)
            self._skip(gone.lines, _size(gone.text) - (gone.lines - 1))
        if self._block_chars > 4 * (self.bounds.max_bytes - self.bounds.head_bytes) + LINE_BYTES:
            self._settle()

    def _skip(self, lines: int, size: int) -> None:
        """`lines` lines (`size` bytes) cut unmade: as many lines follow them as the tail holds, so
        the tail window's lines leave too."""
        while self._tail:
            self._evict()
        self.cut_lines += lines
        self.cut_bytes += size
        self.next_seq += lines
        self._cut_changed = True

    def _settle(self) -> None:
        """The waiting blocks into the tail window: the newest lines it could hold are made (fit,
        numbered, windowed), the ones before them only counted."""
        skip = self._block_lines - self._tail_lines
        blocks = self._blocks
        while skip > 0:
            first = blocks[0]
            if first.lines <= skip:
                blocks.popleft()
                self._skip(first.lines, _size(first.text) - (first.lines - 1))
                skip -= first.lines
                continue
            rest = first.text.split("\n", skip)[-1]
            self._skip(skip, _size(first.text[: len(first.text) - len(rest) - 1]) - (skip - 1))
            blocks[0] = _Block(first.at, first.stream, rest, first.lines - skip)
            skip = 0
        for block in blocks:
            for text in [block.text] if block.whole else block.text.split("\n"):
                self._to_tail(block.at, block.stream, text)
        blocks.clear()
        self._block_lines = self._block_chars = 0

    def _to_tail(self, at: float, stream: Stream, text: str) -> None:
        text, size = fit(text, self.secrets)
        line = Line(self.next_seq, at, stream, text)
        self.next_seq += 1
        self._tail.append((line.seq, size))
        self._pending_tail.append(line)
        self._tail_bytes += size
        tail_lines, tail_bytes = self._tail_lines, self.bounds.max_bytes - self.bounds.head_bytes
        while self._tail and (len(self._tail) > tail_lines or self._tail_bytes > tail_bytes):
            self._evict()

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
        if self._blocks:
            self._settle()
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
