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


def test_many_lines_at_once_keep_and_count_what_one_at_a_time_does() -> None:
    chunks = [[f"a{i}" for i in range(3)], [f"b{i}" for i in range(40)], ["c0"], [f"d{i}" for i in range(25)]]
    single, many = Bounded(Bounds(10, 100_000)), Bounded(Bounds(10, 100_000))
    written: dict[str, dict[int, str]] = {"single": {}, "many": {}}
    for chunk in chunks:
        for text in chunk:
            single.add(0.0, "stdout", text)
        many.add_many(0.0, "stdout", chunk)
        for name, out in (("single", single), ("many", many)):
            taken = out.take(0.0)
            kept = written[name]
            if taken.trim is not None:
                for seq in range(*taken.trim):
                    kept.pop(seq, None)
            kept.update({line.seq: line.text for line in taken.lines})
    assert written["many"] == written["single"]
    assert (many.cut_lines, many.cut_bytes, many.next_seq) == (single.cut_lines, single.cut_bytes, single.next_seq)
    assert sorted(written["many"]) == [*range(6), *range(65, 70)]  # head 5, the cut line, tail 5
