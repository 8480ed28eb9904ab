"""Namespaces' names and the query's default (cronos.namespaces); a channel hears only its own
namespace's jobs (cronos.notify.rules)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronos import namespaces
from cronos.errors import InvalidInput
from cronos.notify.rules import EventFacts, Rule, applies


@pytest.mark.parametrize("name", ["default", "a", "data-team", "x" * 63, "team-2"])
def test_names_a_namespace_may_have(name: str) -> None:
    assert namespaces.check(name) == name


@pytest.mark.parametrize("name", ["", "Data", "-a", "a-", "a_b", "x" * 64, "a b", "*"])
def test_names_refused(name: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        namespaces.check(name)
    assert refused.value.field == "namespace"


def test_a_request_naming_none_acts_on_default_and_every_only_where_allowed() -> None:
    assert namespaces.of_query(None) == namespaces.of_query("") == "default"
    assert namespaces.of_query("data") == "data"
    assert namespaces.of_query("*", every=True) == namespaces.ALL
    with pytest.raises(InvalidInput):
        namespaces.of_query("*")


def test_a_channel_hears_only_of_its_namespace_s_jobs() -> None:
    event = EventFacts(1, 7, "default", "failed", datetime(2026, 1, 1, tzinfo=UTC), namespace="data")
    assert applies(Rule(channel_id=1, namespace="data"), event)
    assert not applies(Rule(channel_id=1), event)
    assert not applies(Rule(channel_id=1, job_ids=frozenset({7})), event)  # listed, but another namespace's
