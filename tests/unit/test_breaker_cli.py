"""`cronos jobs breaker`: only the settings given change (cronos.client.breaker_cli, pure parts)."""

from __future__ import annotations

import argparse

import pytest

from cronos.client.breaker_cli import _count, merged, shown


def test_one_setting_given_keeps_the_other_and_the_job_s_other_expectations() -> None:
    loaded = {"start_within_s": 30.0, "breaker": {"failures": 3, "canary_every": 5}}
    assert merged(loaded, {"canary_every": 10}) == {
        "start_within_s": 30.0,
        "breaker": {"failures": 3, "canary_every": 10},
    }
    assert merged(loaded, {"failures": None}) == {"start_within_s": 30.0, "breaker": {"canary_every": 5}}
    assert merged(loaded, {"failures": None, "canary_every": None}) == {"start_within_s": 30.0}
    assert merged(None, {"failures": 2}) == {"breaker": {"failures": 2}}
    assert merged({"breaker": {"failures": 2}}, {"failures": None}) is None  # nothing left: no expectations


def test_counts_are_whole_numbers_or_default() -> None:
    assert _count("0") == 0 and _count("12") == 12 and _count("default") is None
    for bad in ("-1", "1.5", "x", "", "٣"):
        with pytest.raises(argparse.ArgumentTypeError):
            _count(bad)


def test_what_the_cli_says() -> None:
    job = {"id": 2, "name": "sync-erp", "expectations": {"breaker": {"failures": 2, "canary_every": 3}}}
    assert shown(job) == (
        "Job 2 'sync-erp': the breaker pauses it after 2 failed runs in a row; a canary run every 3 ticks while paused "
        "by it."
    )
    assert "the cluster's failures in a row; no canary" in shown({**job, "expectations": None})
    assert "never (off for this job)" in shown({**job, "expectations": {"breaker": {"failures": 0}}})
    applies = {"failures": 3, "canary_every": 5}  # GET's `breaker`: a queue's default (CRONOS_BREAKER_DEFAULTS)
    assert "3 failed runs in a row (its queue's or the cluster's default); a canary run every 5 ticks" in shown(
        {**job, "expectations": None, "breaker": applies}
    )
    assert "never (no default applies)" in shown({**job, "expectations": None, "breaker": {"failures": 0}})
