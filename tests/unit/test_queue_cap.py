"""The cap on the number of queues (cronos.store.queues.over_cap), from a table."""

from __future__ import annotations

import pytest

from cronos.models import DEFAULT_QUEUE
from cronos.store.queues import orphaned, over_cap


@pytest.mark.parametrize(
    ("queue", "named", "leaving", "cap", "over"),
    [
        ("a", {"default"}, None, 2, False),  # default + a
        ("b", {"default", "a"}, None, 2, True),  # a third
        ("a", {"default", "a"}, None, 2, False),  # already named
        ("default", {"a", "b", "c"}, None, 2, False),  # the default queue is always there
        ("b", {"default", "a"}, "a", 2, False),  # the job moves from a (it alone named) to b
        ("b", {"a"}, None, 2, True),  # the default queue counts though no job names it
        ("z", {f"q{i}" for i in range(500)}, None, 100, True),  # over already (a lowered cap): no new one
        ("q7", {f"q{i}" for i in range(500)}, None, 100, False),  # ... but the existing ones stay usable
    ],
)
def test_only_a_new_queue_past_the_cap_is_over(
    queue: str, named: set[str], leaving: str | None, cap: int, over: bool
) -> None:
    assert over_cap(queue, named, leaving, cap) is over


def test_a_queue_is_orphaned_when_no_job_names_it_and_no_live_executor_reads_it() -> None:
    assert orphaned("gone", named={"a"}, served={"default", "b"})
    assert not orphaned("a", named={"a"}, served=set())  # a job names it: its pool may come
    assert not orphaned("b", named=set(), served={"b"})  # read: its tokens are taken, then it empties
    assert not orphaned(DEFAULT_QUEUE, named=set(), served=set())  # never dropped
