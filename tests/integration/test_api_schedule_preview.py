"""GET /api/schedule/preview: next fire times with DST notes, words, and job creation's 422."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlencode

import pytest

from cronos.settings import Settings
from tests.integration.api_client import Api, running_api


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _preview(api: Api, **query: str) -> tuple[int, dict[str, object]]:
    reply = await api.call("GET", "/api/schedule/preview?" + urlencode(query))
    return reply.status, reply.body


async def test_next_fire_times_in_utc_and_local_with_words(api: Api) -> None:
    status, body = await _preview(
        api, cron_expression="30 2 * * 1", timezone="America/New_York", count="3", **{"from": "2026-01-01T00:00:00Z"}
    )
    assert status == 200, body
    assert body["description"] == "at 02:30 on Monday"
    assert body["timezone"] == "America/New_York"
    assert [(t["at"], t["local"], t["dst"]) for t in body["fire_times"]] == [  # type: ignore[union-attr]
        ("2026-01-05T07:30:00Z", "2026-01-05T02:30:00-05:00", None),
        ("2026-01-12T07:30:00Z", "2026-01-12T02:30:00-05:00", None),
        ("2026-01-19T07:30:00Z", "2026-01-19T02:30:00-05:00", None),
    ]


async def test_defaults_ten_times_from_now_in_utc(api: Api) -> None:
    status, body = await _preview(api, cron_expression="*/5 * * * *")
    assert status == 200, body
    assert body["description"] == "every 5 minutes" and body["timezone"] == "UTC"
    times = body["fire_times"]
    assert isinstance(times, list) and len(times) == 10
    assert all(t["at"].endswith(":00Z") and t["local"].endswith("+00:00") for t in times)


async def test_a_time_in_the_spring_forward_gap_is_marked_moved(api: Api) -> None:
    status, body = await _preview(
        api, cron_expression="30 2 * * *", timezone="Europe/Berlin", count="3", **{"from": "2026-03-28T12:00:00Z"}
    )
    assert status == 200, body
    first, second = body["fire_times"][:2]  # type: ignore[index]
    assert (first["at"], first["local"]) == ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00")
    assert first["dst"]["kind"] == "gap" and "02:00 to 03:00" in first["dst"]["detail"]
    assert second["local"] == "2026-03-30T02:30:00+02:00" and second["dst"] is None


async def test_a_time_named_at_the_gap_end_is_not_marked(api: Api) -> None:
    status, body = await _preview(
        api, cron_expression="0 3 * * *", timezone="Europe/Berlin", count="1", **{"from": "2026-03-28T12:00:00Z"}
    )
    assert status == 200 and body["fire_times"][0]["dst"] is None, body  # type: ignore[index]


async def test_a_repeated_wall_time_fires_once_for_an_appointment(api: Api) -> None:
    status, body = await _preview(
        api, cron_expression="30 2 * * *", timezone="Europe/Berlin", count="2", **{"from": "2026-10-24T12:00:00Z"}
    )
    assert status == 200, body
    first, second = body["fire_times"]  # type: ignore[misc]
    assert first["local"] == "2026-10-25T02:30:00+02:00" and first["dst"]["kind"] == "fold_once"
    assert second["local"] == "2026-10-26T02:30:00+01:00" and second["dst"] is None


async def test_a_repeated_hour_fires_on_both_passes_for_an_every_hour_job(api: Api) -> None:
    status, body = await _preview(
        api, cron_expression="30 * * * *", timezone="Europe/Berlin", count="3", **{"from": "2026-10-25T00:00:00Z"}
    )
    assert status == 200, body
    assert [(t["local"], t["dst"] and t["dst"]["kind"]) for t in body["fire_times"]] == [  # type: ignore[union-attr]
        ("2026-10-25T02:30:00+02:00", "fold_first"),
        ("2026-10-25T02:30:00+01:00", "fold_second"),
        ("2026-10-25T03:30:00+01:00", None),
    ]


async def test_a_bad_expression_is_the_same_problem_as_job_creation(api: Api) -> None:
    for expression in ("61 * * * *", "* * *", "@reboot", "0 0 30 2 *"):
        status, body = await _preview(api, cron_expression=expression)
        created = await api.call("POST", "/api/jobs", json={"name": "x", "cron_expression": expression, "payload": {}})
        assert status == 422 and created.status == 422, (expression, body)
        assert body == created.body, expression


async def test_a_bad_zone_is_the_same_problem_as_job_creation(api: Api) -> None:
    status, body = await _preview(api, cron_expression="* * * * *", timezone="Mars/Olympus")
    created = await api.call(
        "POST",
        "/api/jobs",
        json={"name": "x", "cron_expression": "* * * * *", "timezone": "Mars/Olympus", "payload": {}},
    )
    assert status == 422 and body == created.body and body["field"] == "$.timezone", body


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({}, "$.cron_expression"),
        ({"cron_expression": ""}, "$.cron_expression"),
        ({"cron_expression": "x" * 257}, "$.cron_expression"),
        ({"cron_expression": "* * * * *", "count": "0"}, "count"),
        ({"cron_expression": "* * * * *", "count": "101"}, "count"),
        ({"cron_expression": "* * * * *", "count": "ten"}, "count"),
        ({"cron_expression": "* * * * *", "from": "yesterday"}, "from"),
        ({"cron_expression": "* * * * *\x00"}, "$.cron_expression"),
    ],
)
async def test_bad_query_values_name_their_field(api: Api, query: dict[str, str], field: str) -> None:
    status, body = await _preview(api, **query)
    assert status == 422 and body["field"] == field, body


async def test_a_wall_time_without_offset_is_read_in_the_zone(api: Api) -> None:
    status, body = await _preview(
        api, cron_expression="0 * * * *", timezone="Asia/Tokyo", count="1", **{"from": "2026-06-01T09:00:00"}
    )
    assert status == 200, body
    assert body["fire_times"][0]["local"] == "2026-06-01T10:00:00+09:00"  # type: ignore[index]


async def test_the_list_ends_where_the_calendar_ends(api: Api) -> None:
    status, body = await _preview(api, cron_expression="* * * * *", **{"from": "9999-12-31T23:57:30Z"})
    assert status == 200, body
    assert [t["at"] for t in body["fire_times"]] == ["9999-12-31T23:58:00Z", "9999-12-31T23:59:00Z"]  # type: ignore[union-attr]


async def test_the_list_ends_a_century_after_from(api: Api) -> None:
    """A leap-day expression asked for 100 fire times would span 400 years: the preview looks one
    century ahead and says where it stopped (issue 22)."""
    status, body = await _preview(
        api, cron_expression="0 0 29 2 *", timezone="Europe/Berlin", count="100", **{"from": "2030-01-01T00:00:00Z"}
    )
    assert status == 200, body
    assert body["horizon"] == "2130-01-02T00:00:00Z"  # 36,525 days
    times = [t["at"] for t in body["fire_times"]]  # type: ignore[union-attr]  # 2032 to 2128, 2100 no leap year
    assert len(times) == 24 and times[0] == "2032-02-28T23:00:00Z" and times[-1] == "2128-02-28T23:00:00Z"
    status, body = await _preview(api, cron_expression="* * * * *", **{"from": "9999-12-31T23:57:30Z"})
    assert body["horizon"] == "9999-12-31T23:59:59.999999Z"  # the calendar ends first


async def test_rfc_3339_spellings_of_from(api: Api) -> None:
    for spelling, first in (
        ("2026-06-30t23:59:60z", "2026-07-01T00:01:00Z"),  # a leap second is the next second
        ("2026-07-01T02:00:00.5+02:00", "2026-07-01T00:01:00Z"),
    ):
        status, body = await _preview(api, cron_expression="* * * * *", count="1", **{"from": spelling})
        assert status == 200 and body["fire_times"][0]["at"] == first, (spelling, body)  # type: ignore[index]
