"""cronos.inputs: a manual run's overrides (merge, secrets, target) and a re-run's tick. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronos import inputs
from cronos.errors import Conflict, InvalidInput
from cronos.ticks import Segment

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HTTP = {
    "url": "https://api.example.com/v1/sync?token=Q-SECRET&page=1",
    "headers": {"Authorization": "Bearer H-SECRET", "Accept": "application/json"},
    "body": {"password": "B-SECRET", "n": 1, "items": [1, 2]},
}


def _refused(kind: str, payload: dict[str, object], overrides: dict[str, object]) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        inputs.check_overrides(kind, payload, overrides)
    assert "SECRET" not in str(refused.value)
    return refused.value


def test_merge_patch_is_rfc_7396() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None, "h": 1}, "l": [3], "new": {"x": None}}
    assert inputs.merge_patch(target, patch) == {"a": "z", "c": {"d": "e", "h": 1}, "l": [3], "new": {}}
    assert inputs.merge_patch({"a": 1}, {}) == {"a": 1}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}  # not modified


def test_http_header_names_merge_case_insensitively() -> None:
    merged = inputs.merged_payload("http", {"url": "https://x.example/", "headers": {"X-Mode": "a"}},
                                   {"headers": {"x-mode": "b"}})  # fmt: skip
    assert merged["headers"] == {"x-mode": "b"}


@pytest.mark.parametrize(
    ("overrides", "field", "why"),
    [
        ({"headers": {"Authorization": "Bearer mine"}}, "$.payload.headers.Authorization", inputs.SECRET_OVERRIDDEN),
        ({"headers": {"AUTHORIZATION": None}}, "$.payload.headers.AUTHORIZATION", inputs.SECRET_OVERRIDDEN),
        ({"headers": None}, "$.payload.headers", inputs.SECRET_OVERRIDDEN),
        ({"body": {"password": "x"}}, "$.payload.body.password", inputs.SECRET_OVERRIDDEN),
        ({"body": "flat"}, "$.payload.body", inputs.SECRET_OVERRIDDEN),
        ({"url": "https://api.example.com/v1/sync?page=2"}, "$.payload.url", inputs.SECRET_OVERRIDDEN),
        ({"headers": {"X-Auth-Token": "t"}}, "$.payload.headers.X-Auth-Token", inputs.SECRET_ADDED),
        ({"headers": {"X-Plain": "Bearer abc"}}, "$.payload.headers.X-Plain", inputs.SECRET_ADDED),
        ({"body": {"deep": [{"api_key": "k"}]}}, "$.payload.body.deep", inputs.SECRET_ADDED),
        ({"method": "DELETE"}, "$.payload.method", inputs.TARGET_CHANGED),
        # Where the secrets go is the job's alone (issue 36): Host and the redirect policy.
        ({"headers": {"Host": "tenant-b.example"}}, "$.payload.headers.Host", inputs.JOBS_OWN),
        ({"headers": {"HOST": None}}, "$.payload.headers.HOST", inputs.JOBS_OWN),
        ({"follow_redirects": True}, "$.payload.follow_redirects", inputs.JOBS_OWN),
        ({"secrets_follow_redirects": True}, "$.payload.secrets_follow_redirects", inputs.JOBS_OWN),
    ],
)
def test_http_overrides_never_touch_add_or_move_a_secret(overrides: dict[str, object], field: str, why: str) -> None:
    refused = _refused("http", HTTP, overrides)
    assert (refused.field, refused.message) == (field, why)


def test_http_overrides_elsewhere_are_merged() -> None:
    merged = inputs.check_overrides("http", HTTP, {"headers": {"Accept": "text/plain"}, "body": {"n": 2, "items": []}})
    assert merged["headers"] == {"Authorization": "Bearer H-SECRET", "Accept": "text/plain"}
    assert merged["body"] == {"password": "B-SECRET", "n": 2, "items": []}
    assert merged["url"] == HTTP["url"]


def test_a_job_without_secrets_may_change_its_target() -> None:
    plain = {"url": "https://a.example/x", "headers": {"Accept": "*/*"}}
    merged = inputs.check_overrides("http", plain, {"url": "https://b.example/y", "method": "PUT"})
    assert (merged["url"], merged["method"]) == ("https://b.example/y", "PUT")
    assert _refused("http", plain, {"url": "https://u:pw@b.example/"}).field == "$.payload.url"  # adds a secret


def test_host_and_redirect_policy_stay_the_jobs_with_or_without_secrets() -> None:
    plain = {"url": "https://a.example/x", "headers": {"Host": "a.example", "Accept": "*/*"}}
    assert _refused("http", plain, {"headers": {"host": "b.example"}}).message == inputs.JOBS_OWN
    assert _refused("http", plain, {"headers": None}).field == "$.payload.headers"  # removes Host
    assert _refused("http", plain, {"follow_redirects": False}).field == "$.payload.follow_redirects"
    no_host = {"url": "https://a.example/x", "headers": {"Accept": "*/*"}}
    assert inputs.check_overrides("http", no_host, {"headers": None}) == {"url": "https://a.example/x"}


def test_task_targets_stay_while_secrets_are_held() -> None:
    task = {"action": "sync", "endpoint": "https://a.example/in", "api_key": "K-SECRET", "batch": 10}
    assert inputs.check_overrides("task", task, {"batch": 20})["api_key"] == "K-SECRET"
    refused = _refused("task", task, {"endpoint": "https://evil.example/in"})
    assert (refused.field, refused.message) == ("$.payload.endpoint", inputs.TARGET_CHANGED)
    assert _refused("task", task, {"action": "other"}).field == "$.payload.action"
    assert _refused("task", task, {"api_key": "mine"}).message == inputs.SECRET_OVERRIDDEN


def test_shell_env_secrets_are_kept_argv_may_change() -> None:
    shell = {"argv": ["backup"], "env": {"DB_PASSWORD": "S-SECRET", "MODE": "full"}}
    assert inputs.check_overrides("shell", shell, {"argv": ["backup", "--dry-run"], "env": {"MODE": "inc"}}) == {
        "argv": ["backup", "--dry-run"], "env": {"DB_PASSWORD": "S-SECRET", "MODE": "inc"},
    }  # fmt: skip
    assert _refused("shell", shell, {"env": {"DB_PASSWORD": None}}).field == "$.payload.env.DB_PASSWORD"
    assert _refused("shell", shell, {"env": None}).field == "$.payload.env"


def _seg(start: datetime | None, end: datetime | None, status: str, expr: str = "0 * * * *") -> Segment:
    return Segment(start=start, end=end, revision=1, status=status, cron_expression=expr, timezone="UTC")  # type: ignore[arg-type]


def test_a_rerun_tick_is_one_of_the_schedule_as_of_that_time() -> None:
    created = T0 - timedelta(days=1, minutes=30)
    changed = T0 - timedelta(hours=5, minutes=30)  # hourly, then every 15 minutes from here
    segs = [
        _seg(None, created, "absent"),
        _seg(created, changed, "active"),
        _seg(changed, None, "paused", "*/15 * * * *"),
    ]
    now = T0
    assert inputs.tick_refusal(segs, T0 - timedelta(hours=10), now) is None  # hourly
    assert inputs.tick_refusal(segs, T0 - timedelta(hours=2, minutes=15), now) is None  # 15 min, while paused
    assert inputs.tick_refusal(segs, T0 - timedelta(hours=9, minutes=15), now) == inputs.NOT_A_TICK  # not then
    assert inputs.tick_refusal(segs, T0 - timedelta(days=2), now) == inputs.BEFORE_CREATED
    assert inputs.tick_refusal(segs, T0 + timedelta(hours=1), now) == inputs.IN_FUTURE
    assert inputs.tick_refusal(segs, T0 - timedelta(hours=3, seconds=1), now) == inputs.NOT_A_TICK


def test_a_rerun_takes_the_next_free_attempt_once_the_tick_ended() -> None:
    assert inputs.rerun_attempt(1, T0, None, [], None) == 1
    assert inputs.rerun_attempt(1, T0, 3, [], inputs.NOT_A_TICK) == 4  # a tick the ledger holds (a manual run's)
    with pytest.raises(InvalidInput, match="scheduled_for"):
        inputs.rerun_attempt(1, T0, None, [], inputs.NOT_A_TICK)
    with pytest.raises(Conflict, match="run 7, 9"):
        inputs.rerun_attempt(1, T0, 2, [9, 7], None)


def test_overrides_are_stored_as_the_checks_left_them() -> None:
    merged = {"url": "https://x.example/", "expect_status": [200], "headers": {"x-a": "1", "B": "2"}}
    patch = {"expect_status": [200.0], "headers": {"x-a": "1"}, "gone": None}
    assert inputs.as_applied(patch, merged) == {"expect_status": [200], "headers": {"x-a": "1"}, "gone": None}


def test_a_task_runs_its_own_action() -> None:
    """The run token carries the job's action, and only executors serving it take the token."""
    refused = _refused("task", {"action": "sync", "batch": 10}, {"action": "purge"})
    assert (refused.field, refused.message) == ("$.payload.action", inputs.ACTION_CHANGED)
    assert _refused("task", {"action": "sync"}, {"action": None}).field == "$.payload.action"
