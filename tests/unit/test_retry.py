"""Retry backoff: exponential from retry_backoff_s, capped, and the retry budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from cronos.retry import next_due, planned_delay_s, retry_delay_s, should_retry


def test_delay_doubles_per_attempt() -> None:
    assert [retry_delay_s(10, a) for a in (1, 2, 3, 4)] == [10, 20, 40, 80]


def test_delay_is_capped() -> None:
    assert retry_delay_s(10, 30, cap_s=300) == 300
    assert retry_delay_s(1, 10_000) == 3600  # no overflow on absurd attempts


def test_zero_backoff_retries_at_once() -> None:
    assert retry_delay_s(0, 5) == 0


def test_budget_gives_max_retries_retries() -> None:
    assert [should_retry(a, 2) for a in (1, 2, 3)] == [True, True, False]
    assert should_retry(1, 0) is False
    assert planned_delay_s(3, 2, 10) is None
    assert planned_delay_s(2, 2, 10) == 20


def test_next_due_is_now_plus_delay() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert next_due(now, 5, 3) == now + timedelta(seconds=20)


@given(st.floats(0, 1e6), st.integers(1, 10**6), st.floats(1, 1e6))
def test_delay_is_never_negative_nor_past_the_cap(base: float, attempt: int, cap: float) -> None:
    delay = retry_delay_s(base, attempt, cap)
    assert 0 <= delay <= max(cap, 0)


@given(st.floats(0.001, 100), st.integers(1, 40))
def test_delay_never_shrinks_with_attempts(base: float, attempt: int) -> None:
    assert retry_delay_s(base, attempt + 1) >= retry_delay_s(base, attempt)
