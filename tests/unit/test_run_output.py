"""cronos/run_output.py: a run's output kept within its bound, head and tail, the cut stated,
secrets scrubbed; what each flush writes and deletes."""

from __future__ import annotations

from cronos.run_output import LINE_BYTES, Bounded, Bounds, Line, cut_text, fit


def texts(lines: list[Line]) -> list[tuple[int, str]]:
    return [(line.seq, line.text) for line in lines]


def test_within_the_bound_every_line_is_kept_in_order() -> None:
    out = Bounded(Bounds(max_lines=10, max_bytes=1000))
    for i in range(4):
        out.add(float(i), "stdout", f"l{i}")
    taken = out.take(9.0)
    assert texts(taken.lines) == [(0, "l0"), (1, "l1"), (2, "l2"), (3, "l3")] and taken.trim is None
    assert not out.pending and out.take(9.0).lines == []


def test_past_the_line_bound_the_head_stays_the_tail_moves_and_the_cut_is_counted() -> None:
    out = Bounded(Bounds(max_lines=4, max_bytes=10_000))
    for i in range(5):
        out.add(0.0, "stdout", f"l{i}")  # head l0 l1; cut line at 2; tail l2 l3 (seq 3, 4), then l4 (5)
    first = out.take(1.0)
    assert texts(first.lines) == [(0, "l0"), (1, "l1"), (2, cut_text(1, 2)), (4, "l3"), (5, "l4")]
    assert first.trim is None  # l2 left the tail before it was written: never written
    out.add(0.0, "stderr", "l5")
    second = out.take(2.0)
    assert texts(second.lines) == [(2, cut_text(2, 4)), (6, "l5")] and second.lines[0].stream == "cut"
    assert second.trim == (3, 5)  # l3 (seq 4) was written: deleted now
    assert out.take(3.0).trim is None


def test_the_byte_bound_cuts_too() -> None:
    out = Bounded(Bounds(max_lines=1000, max_bytes=20))
    for i in range(6):
        out.add(0.0, "stdout", f"line{i}")  # 5 bytes each: head 10 bytes (2 lines), tail 10 bytes
    assert [t for _, t in texts(out.take(0.0).lines)] == ["line0", "line1", cut_text(2, 10), "line4", "line5"]


def test_secrets_are_scrubbed_nul_replaced_and_a_long_line_cut_before_anything_is_kept() -> None:
    out = Bounded(Bounds(max_lines=10, max_bytes=100_000), secrets=("hunter2-secret",))
    out.add(0.0, "log", "password hunter2-secret\0 used")
    out.add(0.0, "stdout", "é" * LINE_BYTES)
    shown, long = (line.text for line in out.take(0.0).lines)
    assert shown == "password ***\N{REPLACEMENT CHARACTER} used"
    assert long.endswith(f"…[{LINE_BYTES} more bytes]") and len(long.encode()) <= LINE_BYTES + 30
    assert fit("plain", ()) == ("plain", 5)


def test_a_bound_of_zero_keeps_nothing() -> None:
    out = Bounded(Bounds(max_lines=0, max_bytes=1000))
    out.add(0.0, "stdout", "x")
    assert not out.pending and out.next_seq == 0


def store(out: Bounded, kept: dict[int, str], at: float = 0.0) -> dict[int, str]:
    """Apply one flush of `out` to `kept` (lines by number), as PostgreSQL does; `kept`."""
    taken = out.take(at)
    if taken.trim is not None:
        for seq in range(*taken.trim):
            kept.pop(seq, None)
    kept.update({line.seq: line.text for line in taken.lines})
    return kept


def test_text_written_in_any_pieces_keeps_and_counts_what_one_line_at_a_time_does() -> None:
    chunks = [[f"a{i}" for i in range(3)], [f"b{i}" for i in range(40)], ["c0"], [f"d{i}" for i in range(25)]]
    single, written = Bounded(Bounds(10, 100_000)), Bounded(Bounds(10, 100_000))
    stored: dict[str, dict[int, str]] = {"single": {}, "written": {}}
    for n, chunk in enumerate(chunks):
        for text in chunk:
            single.add(0.0, "stdout", text)
        text = "".join(f"{line}\n" for line in chunk)
        for piece in (text[: n + 1], text[n + 1 :]):  # a line split across two writes
            written.write(0.0, "stdout", piece)
        store(single, stored["single"])
        store(written, stored["written"])
    assert stored["written"] == stored["single"]
    assert (written.cut_lines, written.cut_bytes, written.next_seq) == (
        single.cut_lines,
        single.cut_bytes,
        single.next_seq,
    )
    assert sorted(stored["written"]) == [*range(6), *range(65, 70)]  # head 5, the cut line, tail 5


def ten_mb() -> tuple[list[str], str]:
    """200,000 distinct lines of 49 characters: 10,000,000 bytes with their newlines."""
    lines = [f"{i:07d} a line of a shell job printing ten megaby" for i in range(200_000)]
    assert {len(line) for line in lines} == {49}
    return lines, "".join(f"{line}\n" for line in lines)


def test_a_10_mb_stream_keeps_its_exact_head_and_tail_and_says_how_much_was_cut() -> None:
    lines, text = ten_mb()
    out = Bounded(Bounds(max_lines=2000, max_bytes=2**20))  # the defaults: 1,000 lines of head and tail
    kept: dict[int, str] = {}
    for n, start in enumerate(range(0, len(text), 65_536)):  # as a pipe hands it: 64 KiB reads, across lines
        out.write(0.0, "stdout", text[start : start + 65_536])
        if n % 7 == 0:  # flushes meanwhile: the tail written, then trimmed as it moves
            store(out, kept)
    out.end(0.0)
    store(out, kept)
    seqs = sorted(kept)
    head, cut, tail = [kept[s] for s in seqs[:1000]], kept[seqs[1000]], [kept[s] for s in seqs[1001:]]
    assert len(kept) == 2001 and seqs[:1001] == list(range(1001))
    assert head == lines[:1000] and tail == lines[-1000:]
    assert sum(len(line.encode()) for line in head + tail) == 2000 * 49
    assert cut == cut_text(198_000, 198_000 * 49)
    assert seqs[1001:] == list(range(1001 + 198_000, 1001 + 200_000 - 1000))  # every line its number
    assert (out.cut_lines, out.cut_bytes) == (198_000, 198_000 * 49)


def test_a_10_mb_stream_past_a_byte_bound_keeps_the_bytes_the_bound_allows() -> None:
    lines, text = ten_mb()
    out = Bounded(Bounds(max_lines=100_000, max_bytes=100 * 49))  # 50 lines of head, 50 of tail by bytes
    for start in range(0, len(text), 100_000):
        out.write(0.0, "stdout", text[start : start + 100_000])
    kept = store(out, {})
    assert [kept[s] for s in sorted(kept)] == [*lines[:50], cut_text(199_900, 199_900 * 49), *lines[-50:]]


SECRETS = ("s3cr3t-Value-0451",)


def joined(out: Bounded) -> str:
    out.end(0.0)
    return "\n".join(text for _, text in sorted(store(out, {}).items()))


def test_a_secret_split_across_writes_is_scrubbed_in_the_head_and_the_tail() -> None:
    secret = SECRETS[0]
    for filler in (0, 5000):  # in the head; past it, in the tail (5,000 lines before it)
        for split in range(1, len(secret)):
            out = Bounded(Bounds(max_lines=100, max_bytes=100_000), secrets=SECRETS)
            out.write(0.0, "stdout", "x\n" * filler + f"key={secret[:split]}")
            out.write(0.0, "stderr", "between\n")  # another stream meanwhile
            out.write(0.0, "stdout", f"{secret[split:]} used\n")
            text = joined(out)
            assert secret not in text and "key=*** used" in text, (filler, split)


def test_a_secret_where_a_line_without_newlines_is_taken_is_never_kept_in_part() -> None:
    secret = SECRETS[0]
    for split in range(1, len(secret)):  # the stream reaches LINE_BYTES with the secret's start
        out = Bounded(Bounds(max_lines=100, max_bytes=1_000_000), secrets=SECRETS)
        out.write(0.0, "stdout", "y" * (LINE_BYTES - split) + secret[:split])
        out.write(0.0, "stdout", secret[split:] + " done\n")
        kept = [text for _, text in sorted(store(out, {}).items())]
        assert len(kept) == 2 and all(len(text) < LINE_BYTES for text in kept), split  # taken, none cut by fit
        assert secret not in "".join(kept) and kept[1].endswith("*** done"), split  # nor across the two
