"""`concurrency_groups:` in jobs files (cronos.client.apply_groups): what apply does with them."""

from __future__ import annotations

import re

import jsonschema
import pytest

from api.jobs_file import jobs_file_schema
from cronos.client.apply_groups import CALENDARS, desired_groups, desired_named, plan_groups, plan_named
from cronos.client.jobs_file import ApplyInvalid


def test_groups_are_created_updated_or_left_as_they_are() -> None:
    desired = desired_groups([("a.yaml", {"concurrency_groups": {"warehouse": 2, "api": 5}, "jobs": []})])
    assert plan_groups(desired, {"api": 5, "other": 1}) == [("unchanged", "api", 5), ("create", "warehouse", 2)]
    assert plan_groups(desired, {"warehouse": 3, "api": 5})[1] == ("update", "warehouse", 2)


def test_two_files_giving_one_group_two_limits_are_refused() -> None:
    documents = [
        ("a.yaml", {"concurrency_groups": {"warehouse": 2}}),
        ("b.yaml", {"concurrency_groups": {"warehouse": 3}}),
    ]
    with pytest.raises(
        ApplyInvalid, match=re.escape("b.yaml: concurrency_groups.warehouse: limit 3 here, limit 2 in a.yaml")
    ):
        desired_groups(documents)


@pytest.mark.parametrize("groups", [{"warehouse": 0}, {"no spaces": 1}, {"warehouse": "2"}, ["warehouse"]])
def test_the_jobs_file_schema_refuses_a_bad_group(groups: object) -> None:
    validator = jsonschema.Draft202012Validator(jobs_file_schema())
    assert list(validator.iter_errors({"jobs": [], "concurrency_groups": groups}))
    assert not list(validator.iter_errors({"jobs": [], "concurrency_groups": {"warehouse": 2}}))


def test_calendars_are_compared_with_their_defaults_filled() -> None:
    documents = [("a.yaml", {"calendars": {"holidays": {"dates": ["2026-12-25"]}}, "jobs": []})]
    desired = desired_named(CALENDARS, documents)
    stored = {"timezone": "UTC", "dates": ["2026-12-25"], "ranges": [], "weekdays": [], "description": ""}
    assert plan_named(desired, {"holidays": stored}) == [("unchanged", "holidays", stored)]
    moved = {**stored, "timezone": "Europe/Paris"}
    assert plan_named(desired, {"holidays": moved})[0][0] == "update"
    assert plan_named(desired, {})[0][0] == "create"
