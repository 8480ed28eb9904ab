"""Which stream-group consumers the leader retires (cronos.consumers)."""

from __future__ import annotations

from cronos.consumers import Member, Verdict, to_retire, verdict

BOUND_MS = 300_000


def _member(name: str, *, pending: int = 0, idle_ms: int = BOUND_MS, queue: str = "default") -> Member:
    return Member(queue, name, pending, idle_ms)


def test_a_gone_idle_consumer_with_nothing_pending_is_removed() -> None:
    assert verdict(_member("gone"), present=set(), idle_bound_ms=BOUND_MS) is Verdict.REMOVE


def test_a_gone_idle_consumer_with_entries_pending_hands_them_back_first() -> None:
    # DELCONSUMER would destroy its pending entries: they go back to the group, then it goes.
    assert verdict(_member("gone", pending=3), present=set(), idle_bound_ms=BOUND_MS) is Verdict.HAND_BACK


def test_a_present_executor_is_kept_however_long_it_has_been_idle() -> None:
    # A live executor of a quiet queue gets no entry for hours (Redis 7.0 counts no empty read).
    quiet = _member("live", idle_ms=10 * BOUND_MS)
    assert verdict(quiet, present={"live"}, idle_bound_ms=BOUND_MS) is Verdict.KEEP
    assert verdict(_member("live", pending=2, idle_ms=10 * BOUND_MS), {"live"}, BOUND_MS) is Verdict.KEEP


def test_a_consumer_active_within_the_bound_is_kept_even_without_presence() -> None:
    # Presence lapses (an executor whose PostgreSQL is away skips its beat); activity still counts.
    assert verdict(_member("busy", idle_ms=BOUND_MS - 1), present=set(), idle_bound_ms=BOUND_MS) is Verdict.KEEP
    assert verdict(_member("busy", idle_ms=BOUND_MS), present=set(), idle_bound_ms=BOUND_MS) is Verdict.REMOVE


def test_to_retire_picks_the_gone_ones_of_every_queue() -> None:
    members = [
        _member("a"),
        _member("b", pending=1, queue="gpu"),
        _member("c", idle_ms=5),
        _member("d", idle_ms=10 * BOUND_MS),
    ]
    assert [(m.queue, m.name) for m in to_retire(members, present={"d"}, idle_bound_ms=BOUND_MS)] == [
        ("default", "a"),
        ("gpu", "b"),
    ]
