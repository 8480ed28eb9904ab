"""Bounded excerpts and the head-and-tail capture of a stream (executor.kinds.base)."""

from __future__ import annotations

import pytest

from executor.kinds.base import Capture, excerpt


def _captured(limit: int, *chunks: bytes) -> Capture:
    capture = Capture(limit)
    for chunk in chunks:
        capture.feed(chunk)
    return capture


def test_a_stream_that_fits_is_kept_whole() -> None:
    assert _captured(10, b"ab", b"cdefgh", b"ij").excerpt() == "abcdefghij"
    assert _captured(10).excerpt() == ""


@pytest.mark.parametrize(
    "chunks",
    [
        [b"abcdefghijklmnopqrstuvwxyz"],
        [bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyz"],
        [b"abc", b"defghijklmnopqrstuvw", b"xyz"],
    ],
)
def test_a_long_stream_keeps_its_head_and_tail_whatever_the_chunks(chunks: list[bytes]) -> None:
    capture = _captured(10, *chunks)
    assert capture.excerpt() == "abcde…[16 bytes dropped]…vwxyz"
    assert (capture.total, len(capture.head), len(capture.tail)) == (26, 5, 5)


def test_memory_is_bounded_by_the_excerpt() -> None:
    capture = _captured(100, *([b"x" * 65536] * 100))
    assert len(capture.head) + len(capture.tail) == 100 and capture.total == 6_553_600


def test_characters_cut_at_either_end_are_left_out_and_nul_is_replaced() -> None:
    assert _captured(8, "ééééééééé".encode()).excerpt() == "éé…[10 bytes dropped]…éé"
    assert _captured(7, "€€€€€".encode()).excerpt() == "€…[8 bytes dropped]…€"  # head 4 bytes, tail 3
    assert _captured(10, b"a\x00b").excerpt() == "a\ufffdb"
    assert _captured(0, b"abc").excerpt() == "…[3 bytes dropped]…"


def test_excerpt_cuts_on_a_character_and_holds_no_nul() -> None:
    assert excerpt("€€", 4) == "€…[2 more bytes]"
    assert excerpt(b"a\x00b", 10) == "a\ufffdb"
    assert excerpt(None, 10) is None
