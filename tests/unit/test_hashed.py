"""Jenkins' `H` (cronos.hashed, issue 40 item 2): a value each job keeps, from its name alone."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from cronos.cron_fields import MINUTE, parse
from cronos.errors import InvalidSchedule
from cronos.fleet_starts import Group, starts_per_minute
from cronos.hashed import described, has_hash, hashed, offset
from cronos.schedule_window import job_schedule

NOW = datetime(2026, 1, 10, tzinfo=UTC)


def test_the_value_is_the_names_and_nothing_elses() -> None:
    # A fixed figure: the same on every host, Python and run (sha256, not hash(), which is salted).
    assert hashed("H * * * *", "nightly-report") == "40 * * * *"
    assert hashed("H * * * *", "db-backup") == "59 * * * *"
    assert offset("nightly-report", MINUTE, 60) == 40
    # Other jobs, before or after it, move nothing: the value is a function of the name.
    fleet = [f"job-{n}" for n in range(500)]
    alone = {name: hashed("H * * * *", name) for name in fleet}
    assert {name: hashed("H * * * *", name) for name in reversed([*fleet, "new-one"])} | alone == {
        **alone,
        "new-one": hashed("H * * * *", "new-one"),
    }


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("H * * * *", "40 * * * *"),
        ("H(0-29)/10 * * * *", "0-29/10 * * * *"),
        ("H/15 * * * *", "10-59/15 * * * *"),
        ("H H(9-17) * * 1-5", "40 17 * * 1-5"),
        ("0 0 H * *", "0 0 23 * *"),
        ("H,30 * * * *", "40,30 * * * *"),
        ("h * * * *", "40 * * * *"),
        ("0 0 * * THU", "0 0 * * THU"),  # a name holding an H is no H
        ("@hourly", "@hourly"),
        ("*/5 * * * *", "*/5 * * * *"),
    ],
)
def test_h_forms(written: str, plain: str) -> None:
    assert hashed(written, "nightly-report") == plain
    assert has_hash(written) is (written != plain)


def test_h_keeps_to_its_range_and_days_every_month_has() -> None:
    names = [f"j{n}" for n in range(2000)]
    assert {int(hashed("0 0 H * *", n).split()[2]) for n in names} == set(range(1, 29))
    assert {int(hashed("0 0 * * H", n).split()[4]) for n in names} == set(range(7))
    assert {int(hashed("H(10-12) * * * *", n).split()[0]) for n in names} == {10, 11, 12}
    starts = Counter(hashed("H/15 * * * *", n).split()[0].split("-")[0] for n in names)
    assert set(starts) == {str(v) for v in range(15)}  # H/15: an offset below the step
    for n in names[:50]:
        parse(hashed("H(0-29)/10 H * * H", n))  # always an expression the parser accepts


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("H(30-10) * * * *", "the range must lie within 0-59, low to high"),
        ("H(0-60) * * * *", "the range must lie within 0-59"),
        ("H-5 * * * *", "write H, H(a-b), H/n or H(a-b)/n"),
        ("H/0 * * * *", "minute field 'H/0': the step must be a positive integer"),
    ],
)
def test_malformed_h_is_refused_naming_the_field(written: str, says: str) -> None:
    with pytest.raises(InvalidSchedule, match=says.replace("(", r"\(").replace(")", r"\)")) as caught:
        parse(hashed(written, "x"))
    assert caught.value.field == "$.cron_expression"


def test_without_a_name_h_is_refused_by_the_parser() -> None:
    with pytest.raises(InvalidSchedule, match="H is a job's, hashed from its name"):
        parse("H * * * *")
    with pytest.raises(InvalidSchedule, match=r"R \(random\) is not supported, jitter_s is"):
        parse("R * * * *")


def test_a_jobs_schedule_takes_its_names_values() -> None:
    schedule, _ = job_schedule("H * * * *", "UTC", key="nightly-report")
    assert schedule.next_after(NOW) == datetime(2026, 1, 10, 0, 40, tzinfo=UTC)


def test_the_note_says_what_h_is_for_the_job() -> None:
    said = described("H(0-29)/10 H * * *", "x")
    assert said is not None and "`H(0-29)/10` in the minute field is `2-29/10`" in said
    assert "for the job named 'x'" in said
    assert described("*/5 * * * *", "x") is None


def test_the_fleet_view_counts_each_job_at_its_value_and_the_peak_it_flattens() -> None:
    names = tuple(f"hourly-{n}" for n in range(120))
    group = Group("H * * * *", "UTC", 0.0, len(names), tuple(range(1, 121)), names)
    plain = Group("0 * * * *", "UTC", 0.0, 3)
    starts = starts_per_minute([group, plain], NOW, 60)
    assert starts.spread_jobs == 120
    assert starts.unspread_peak == 123  # every H at minute 0, with the three plain :00 jobs
    assert max(starts.counts) < 15  # spread over the hour: 2 a minute on average
    assert sum(starts.counts) == 123
    expected = Counter(int(hashed("H * * * *", n).split()[0]) for n in names)
    assert starts.counts[1:] == [expected[m] for m in range(1, 60)]
