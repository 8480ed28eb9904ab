"""Chain edges and joins (issue 40): when a child job runs after its parents. Pure: no I/O, no clock.

An edge (parent -> child) fires on its parent's final outcome for a tick, as the child's `chain.on`
names it: `completed` (the default, as chains always did), `failed` (the tick's last attempt
failed: no retry left) or `ended` (any of completed, failed or cancelled). A run that failed with a
retry left is not final: its tick has not ended yet.

Without a join the child runs once per parent run that fires its edge (cronos.lifecycle.chain_runs).
With `chain.join` it runs once per logical tick of its parents (the `scheduled_for` of their runs),
when every parent has fired its edge for that tick; it is skipped at once, with the reason, when
a parent ended the tick without firing it; and when not every parent has ended the tick
`timeout_s` after the first one did, it runs or is skipped as `on_timeout` says. The store keeps a
join's arrivals per (child, tick) and applies `decide` (cronos.store.joins).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TypeGuard

from cronos.errors import InvalidInput
from cronos.models import Chain, ChainOn, RunState

FIELD = "$.chain"
DEFAULT_ON: ChainOn = "completed"
FIRES: Mapping[ChainOn, frozenset[RunState]] = {
    "completed": frozenset({RunState.COMPLETED}),
    "failed": frozenset({RunState.FAILED}),
    "ended": frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED}),
}
# The outcomes a parent's tick can end in, as far as its children are concerned.
ENDS = FIRES["ended"]


def final(state: RunState, retry_left: bool) -> bool:
    """Whether a run that just ended ended its tick (a failure with a retry left did not)."""
    return state in ENDS and not (state is RunState.FAILED and retry_left)


def edge_on(chain: Chain | None, parent: int) -> ChainOn:
    """When the child runs after `parent`."""
    return DEFAULT_ON if chain is None else chain.on.get(str(parent), DEFAULT_ON)


def fires(on: ChainOn, state: RunState) -> bool:
    """Whether a parent's final outcome `state` fires an edge that waits for `on`."""
    return state in FIRES[on]


def joins(chain: Chain | None) -> TypeGuard[Chain]:
    """Whether the child waits for all its parents per logical tick."""
    return chain is not None and chain.join is not None


def check(parents: Sequence[int], chain: Chain | None) -> None:
    """Refuse (InvalidInput naming the field) an edge of a parent the job does not name, or a
    join without parents."""
    if chain is None:
        return
    named = {str(p) for p in parents}
    for key in chain.on:
        if key not in named:
            raise InvalidInput(f"{FIELD}.on", f"{key!r} is not one of the job's parents {sorted(parents)}")
    if chain.join is not None and not parents:
        raise InvalidInput(f"{FIELD}.join", "a join needs parents to wait for")


class Join(StrEnum):
    """What a join of one (child, tick) does."""

    WAIT = "wait"  # a parent has not ended the tick yet
    RUN = "run"  # every parent fired its edge (or the timeout says run)
    SKIP = "skip"  # a parent ended the tick without firing its edge (or the timeout says skip)


@dataclass(frozen=True, slots=True)
class Arrival:
    """A parent's final outcome for a tick, as the join holds it."""

    parent: int
    run_id: int
    state: RunState


@dataclass(frozen=True, slots=True)
class Decision:
    join: Join
    reason: str | None = None  # why it skipped, or ran without every parent


def deadline(first_end: datetime, chain: Chain) -> datetime:
    """When a join whose first parent ended the tick at `first_end` times out."""
    assert chain.join is not None
    return first_end + timedelta(seconds=chain.join.timeout_s)


def decide(parents: Sequence[int], chain: Chain, arrivals: Sequence[Arrival], *, timed_out: bool) -> Decision:
    """The join of one tick of a child with these `parents` (its current ones: an arrival of a
    parent it no longer names is ignored) and `chain`, given the arrivals so far (a parent that
    arrived twice, a retry by hand of its tick, counts by its latest)."""
    assert chain.join is not None
    latest = {a.parent: a for a in arrivals if a.parent in parents}
    for parent in parents:
        arrival = latest.get(parent)
        if arrival is not None and not fires(on := edge_on(chain, parent), arrival.state):
            return Decision(Join.SKIP, f"parent {parent} ended {arrival.state.value}; its edge waits for {on}")
    missing = [p for p in parents if p not in latest]
    if not missing:
        return Decision(Join.RUN)
    if not timed_out:
        return Decision(Join.WAIT)
    waited = ", ".join(str(p) for p in missing)
    reason = f"join timed out after {chain.join.timeout_s:g} s waiting for parent(s) {waited}"
    return Decision(Join.RUN if chain.join.on_timeout == "run" else Join.SKIP, reason)
