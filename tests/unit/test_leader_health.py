"""The cluster view's judgement of the leader (issue 16): a lock holder that cannot reach
PostgreSQL is not shown healthy."""

from __future__ import annotations

import time

from api.cluster import leader_health
from api.schemas import NodeOut


def _dispatcher(node_id: str, **info: str) -> NodeOut:
    return NodeOut(role="dispatcher", node_id=node_id, last_heartbeat=None, age_s=None, info=info)


def test_no_holder_no_judgement() -> None:
    assert leader_health(None, [_dispatcher("d1")], ttl_s=5) is None


def test_a_holder_without_leader_presence_is_not_healthy() -> None:
    assert leader_health("d1", [], ttl_s=5).healthy is False  # type: ignore[union-attr]
    follower = _dispatcher("d1", leader="0", db_ok_at=str(time.time()), db_timeout_s="2")
    health = leader_health("d1", [follower], ttl_s=5)
    assert health is not None and health.node_id == "d1" and not health.healthy


def test_a_recent_round_trip_is_healthy_and_an_old_one_is_not() -> None:
    now = time.time()
    fresh = _dispatcher("d1", leader="1", db_ok_at=str(now - 1), wrote_at=str(now - 0.5), db_timeout_s="2")
    health = leader_health("d1", [fresh], ttl_s=5)
    assert health is not None and health.healthy
    assert health.db_ok_age_s is not None and 0.9 <= health.db_ok_age_s < 5
    assert health.write_age_s is not None and health.write_age_s < health.db_ok_age_s
    stale = _dispatcher("d1", leader="1", db_ok_at=str(now - 8), wrote_at=str(now - 8), db_timeout_s="2")
    health = leader_health("d1", [stale], ttl_s=5)  # older than db timeout (2 s) + ttl (5 s)
    assert health is not None and not health.healthy and health.db_ok_age_s is not None
