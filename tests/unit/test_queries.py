"""The statements are written out literally: what they share must still agree."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

from cronos.models import JOB_COLUMNS, JOB_WRITABLE
from cronos.store import queries
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import output as output_q
from cronos.store.queries import upkeep as upkeep_q
from cronos.store.queries import usage as usage_q


def test_job_writes_take_the_writable_fields_in_their_order() -> None:
    inserted = re.search(r"INSERT INTO jobs \(([^)]*)\)", jobs_q.JOB_INSERT)
    assert inserted is not None
    assert [c.strip() for c in inserted.group(1).split(",")] == [*JOB_WRITABLE, "last_scheduled_for"]
    assert f"least(now(), ${JOB_WRITABLE.index('run_at') + 1}::timestamptz" in " ".join(jobs_q.JOB_INSERT.split())
    assert f"${len(JOB_WRITABLE) + 1}))" in jobs_q.JOB_INSERT  # the first usable instant, after the columns
    assigned = re.findall(r"(\w+) = \$(\d+)", jobs_q.JOB_UPDATE)
    assert assigned[: len(JOB_WRITABLE)] == [(name, str(i)) for i, name in enumerate(JOB_WRITABLE, 2)]


def statements() -> dict[str, str]:
    """Every statement of every query module, by module.name."""
    found = {}
    for module in pkgutil.iter_modules(queries.__path__):
        loaded = importlib.import_module(f"{queries.__name__}.{module.name}")
        found.update({f"{module.name}.{k}": v for k, v in vars(loaded).items() if k.isupper() and isinstance(v, str)})
    return found


# Where a statement's list of a job's columns starts (an alias such as `j.` before each, or none).
JOB_LIST_START = re.compile(
    r"\b(?:(\w+)\.)?id, (\w+\.)?name, (\w+\.)?cron_expression, (\w+\.)?timezone, (\w+\.)?kind, (\w+\.)?payload, "
)


def test_every_statement_that_reads_a_job_names_the_job_struct_s_fields_in_order() -> None:
    # A job's column list is written out in each statement (no statement is built from fragments);
    # each one must be the Struct's, so a field added to Job and missed in one statement fails here.
    lists = 0
    for name, sql in statements().items():
        for match in JOB_LIST_START.finditer(sql):
            columns = [c.strip() for c in sql[match.start() :].split(",")][: len(JOB_COLUMNS)]
            prefix = f"{match.group(1)}." if match.group(1) else ""
            assert [c.removeprefix(prefix).split()[0] for c in columns] == list(JOB_COLUMNS), name
            lists += 1
    assert lists >= 14


def test_every_notification_goes_to_the_jobs_channel() -> None:
    for name in ("NOTIFY", "NOTIFY_EACH"):
        assert f"pg_notify('{notifications_q.JOBS_CHANNEL}'" in getattr(notifications_q, name)
    assert f"pg_notify('{notifications_q.OUTPUT_CHANNEL}'" in notifications_q.OUTPUT_NOTIFY


def test_output_partitions_are_made_as_the_runs_partitions_are() -> None:
    # Written out, as every statement is; the same statements but for the table they name.
    assert upkeep_q.PARTITION_BUILD.replace("LIKE runs", "LIKE run_output") == output_q.OUTPUT_PARTITION_BUILD
    assert (
        upkeep_q.PARTITION_TAKE_DEFAULT.replace("runs_default", "run_output_default")
        == output_q.OUTPUT_PARTITION_TAKE_DEFAULT
    )
    assert (
        upkeep_q.PARTITION_ATTACH.replace("TABLE runs", "TABLE run_output") == output_q.OUTPUT_PARTITION_ATTACH.strip()
    )


def test_usage_partitions_are_made_as_the_output_partitions_are() -> None:
    for part in ("BUILD", "TAKE_DEFAULT", "ATTACH", "DROP"):
        output, usage = getattr(output_q, f"OUTPUT_PARTITION_{part}"), getattr(usage_q, f"USAGE_PARTITION_{part}")
        assert output.replace("run_output", "run_usage") == usage, part
    assert output_q.OUTPUT_DEFAULT_PURGE.replace("run_output", "run_usage").replace(" o", " u").replace("o.", "u.") == (
        usage_q.USAGE_DEFAULT_PURGE
    )


def test_every_statement_is_written_out_not_built_from_fragments() -> None:
    built = [
        f"{module.name}.{target.id}"
        for module in pkgutil.iter_modules(queries.__path__)
        for node in ast.parse((Path(queries.__path__[0]) / f"{module.name}.py").read_text()).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and not isinstance(node.value, ast.Constant)
    ]
    assert built == []
