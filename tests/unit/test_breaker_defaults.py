"""A default breaker per queue (CRONOS_BREAKER_DEFAULTS, cronos.breaker): parsed naming the bad
entry, applied setting by setting under a job's own `expectations.breaker`, over the cluster's."""

from __future__ import annotations

import pytest

from cronos.breaker import canary_every, effective, of_queue, parse_defaults, threshold
from cronos.errors import ConfigError
from cronos.models import Breaker, Expectations
from cronos.settings import load_settings


def test_entries_parse_and_bad_ones_are_named() -> None:
    assert parse_defaults("etl=3:5, reports=2,") == (
        ("etl", Breaker(failures=3, canary_every=5)),
        ("reports", Breaker(failures=2)),
    )
    assert parse_defaults("") == ()
    for bad, why in (("etl", "queue=failures"), ("etl=x", "queue=failures"), ("etl=3:", "queue=failures"),
                     ("etl=20000", "0..10000"), ("etl=1,etl=2", "named once")):  # fmt: skip
        with pytest.raises(ValueError, match=why):
            parse_defaults(bad)
    settings = load_settings(environ={"CRONOS_BREAKER_DEFAULTS": "etl=3:5"}, env_file=None)
    assert settings.breaker_defaults == (("etl", Breaker(failures=3, canary_every=5)),)
    with pytest.raises(ConfigError, match="CRONOS_BREAKER_DEFAULTS: 'no queue!' must be a queue name"):
        load_settings(environ={"CRONOS_BREAKER_DEFAULTS": "no queue!=3"}, env_file=None)


def test_a_jobs_own_setting_wins_then_its_queues_then_the_clusters() -> None:
    defaults = parse_defaults("etl=3:5")
    etl = of_queue(defaults, "etl")
    assert of_queue(defaults, "default") is None
    none, own = None, Expectations(breaker=Breaker(failures=7))
    assert (threshold(none, 9, etl), canary_every(none, etl)) == (3, 5)
    assert (threshold(own, 9, etl), canary_every(own, etl)) == (7, 5)  # its own failures, the queue's canary
    assert (threshold(none, 9, None), canary_every(none, None)) == (9, 0)
    assert effective(own, "etl", 0, defaults) == Breaker(failures=7, canary_every=5)
    assert effective(None, "other", 0, defaults) == Breaker(failures=0, canary_every=0)
