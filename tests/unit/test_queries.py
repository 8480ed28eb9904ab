"""The statements are written out literally: what they share must still agree."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from cronos import store
from cronos.lifecycle import BY_EVENT, PENDING, TRANSITIONS, Event, Fence
from cronos.models import JOB_COLUMNS, JOB_WRITABLE
from cronos.store import queries
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import output as output_q
from cronos.store.queries import runs as runs_q
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


# Each event of cronos.lifecycle.TRANSITIONS, the statements (of cronos.store.queries.runs) that apply
# it, and the column each one's guard reads the run's state from: the run's row as the statement
# locked it (`l.state`, ...), or as it finds it (`state`).
APPLIED_BY: dict[Event, tuple[tuple[str, tuple[str, ...]], ...]] = {
    Event.WRITTEN: (("TICKS_WRITE", ()), ("TICKS_FAN_OUT", ())),
    Event.TRIGGERED: (("RUN_INSERT_MANUAL", ()), ("RERUN_INSERT", ()), ("RUN_INSERT_RERUN", ()), ("CANARY_INSERT", ())),
    Event.RETRIED: (("RUNS_QUEUE", ()),),
    Event.CHAINED: (("RUNS_QUEUE", ()), ("RUNS_JOIN", ())),
    Event.PUSHED: (("OUTBOX_MARK", ("l.state",)),),
    Event.UNPUSHED: (("OUTBOX_UNMARK", ("state",)), ("OUTBOX_UNMARK_OVERDUE", ("state",))),
    Event.CLAIMED: (("CLAIM_FREE", ("l.state",)), ("CLAIM_RUNS", ("l.state",))),
    Event.RESERVED: (("CLAIM_FREE", ("l.state",)),),  # its state $6: reserved ahead of the due time, else running
    Event.STARTED: (("RUNS_START", ("l.state",)),),
    Event.UNRESERVED: (("RUNS_UNRESERVE", ("l.state",)),),
    Event.TAKEN_BACK: (("RUNS_TAKE_BACK", ("l.state",)),),
    Event.RELEASED: (("RUNS_RELEASE", ("state",)),),
    Event.WAITED: (("RUNS_WAIT", ("l.state",)), ("RUNS_WAIT_GROUP", ("l.state",))),
    Event.WOKEN: (("RUNS_WAKE", ("l.state",)),),
    Event.OVERLAPPED: (("RUNS_SKIP", ("l.state",)),),
    Event.MISFIRED: (("RUNS_SKIP_QUEUED", ("l.state",)),),
    Event.EXPIRED: (("RUNS_SKIP", ("l.state",)), ("EXPIRE_PENDING", ("q.state", "w.state"))),
    Event.HANDED_OVER: (("RUNS_SKIP_QUEUED", ("l.state",)),),
    Event.COMPLETED: (("FINISH_RUNS", ("u.current",)),),
    Event.FAILED: (("FINISH_RUNS", ("u.current",)),),
    Event.LOST: (("LOST_RUNS", ("r.state",)),),
    Event.REPLACED: (("REPLACE_RUNNING", ("l.state",)),),
    Event.CANCELLED: (("RUN_CANCEL", ("state",)),),
    Event.CANCEL_REQUESTED: (("RUN_CANCEL_REQUEST", ()),),  # beside the run: its state read under RUN_LOCK_FOR_CANCEL
    Event.STOPPED: (("FINISH_RUNS", ("u.current",)),),
}
# Where a statement reads the owner's node: an OWNER-fenced event's statement checks it.
OWNER_GUARD = re.compile(r"\bowner = u\.node_id\b|\bnode_id = \$\d")


def guarded_states(sql: str, column: str) -> set[str]:
    """The states a statement's guard allows on `column` (`= 'x'` or `IN ('x', 'y')`)."""
    before = r"(?:WHERE|AND)\s+" if "." not in column else r"(?<![\w.])"
    found = re.findall(before + re.escape(column) + r"\s*(?:= '(\w+)'|IN \(([^)]*)\))", sql)
    return {s.strip(" '") for one, many in found for s in ([one] if one else many.split(","))}


def test_every_event_of_the_lifecycle_is_applied_by_statements_bound_to_it() -> None:
    assert set(APPLIED_BY) == set(BY_EVENT)
    written = {
        name for name, sql in statements().items() if re.search(r"INSERT INTO runs\b|UPDATE runs r? ?SET state", sql)
    }
    bound = {f"runs.{name}" for applied in APPLIED_BY.values() for name, _ in applied}
    # A statement that writes a run's state applies an event of the table (and is bound to it here).
    assert written <= bound, written - bound


@pytest.mark.parametrize("event", list(Event))
def test_each_statement_s_guard_is_its_event_s_from_states_and_fence(event: Event) -> None:
    transition = BY_EVENT[event]
    for name, columns in APPLIED_BY[event]:
        sql = " ".join(getattr(runs_q, name).split())
        if not transition.sources:  # a new run: inserted, guarded by nothing but the tick identity
            assert sql.startswith("INSERT INTO runs") or "INSERT INTO runs (" in sql, name
            continue
        if not columns:
            assert event is Event.CANCEL_REQUESTED and sql.startswith("INSERT INTO run_cancels"), name
            continue
        allowed = set().union(*(guarded_states(sql, c) for c in columns))
        assert allowed == {s.value for s in transition.sources}, (name, allowed)
        target = re.search(r"\bSET state = '(\w+)'", sql)
        if target is not None:
            assert target.group(1) == transition.target.value, name
        if transition.fence is Fence.OWNER:
            assert OWNER_GUARD.search(sql), f"{name}: {event} is fenced by the run's owner"


# A job's grace read as a fact (a select-list item), never computed with: lifecycle.expiry stamps it.
GRACE_READ = re.compile(r"(?<=[\s,])(?:\w+\.)?misfire_grace_s(?:\s+AS\s+\w+)?(?=\s*(?:,|FROM\b|$))")


@pytest.mark.parametrize("name", sorted(n for n in statements() if n.startswith("runs.")))
def test_no_run_statement_restates_the_grace_arithmetic(name: str) -> None:
    # One expiry rule (cronos.lifecycle.expiry, stamped once in runs.expires_at): a statement that
    # judges lateness compares an instant with that column; none adds a grace or its 1 s floor.
    sql = " ".join(statements()[name].split())
    assert "misfire_grace_s" not in GRACE_READ.sub("", sql), f"{name} computes with a job's grace"
    assert not re.search(r"interval '1 second'|greatest\([^)]*\b1\)|secs => greatest", sql), name


@pytest.mark.parametrize("name", ["CLAIM_FREE", "EXPIRE_PENDING", "TICKS_WRITE"])
def test_the_statements_that_judge_lateness_compare_the_stamped_expiry(name: str) -> None:
    sql = " ".join(getattr(runs_q, name).split())
    assert re.search(r"\bexpires_at (?:<=|>) (?:clock_timestamp\(\)|now\(\)|t\.held_at)", sql), name
    assert "due_at +" not in sql and "due_at -" not in sql, name


_RUN_INSERTS = [n for n in dir(runs_q) if re.search(r"INSERT INTO runs \(", str(getattr(runs_q, n)))]


def test_the_run_inserts_are_found() -> None:
    assert {"TICKS_WRITE", "TICKS_FAN_OUT", "RUN_INSERT_MANUAL", "RUNS_QUEUE", "RUNS_JOIN"} <= set(_RUN_INSERTS)


@pytest.mark.parametrize("name", _RUN_INSERTS)
def test_every_insert_of_a_run_stamps_its_expiry(name: str) -> None:
    inserted = re.search(r"INSERT INTO runs \(([^)]*)\)", getattr(runs_q, name))
    assert inserted is not None and "expires_at" in inserted.group(1), name


def test_ticks_are_written_queued_or_skipped_and_held_behind_a_pending_run() -> None:
    # WRITTEN makes a tick queued; a tick written past its grace (misfired) or held behind a pending
    # run of its job (lifecycle.one_pending: SKIP_PENDING) is inserted skipped, never a state between.
    sql = " ".join(runs_q.TICKS_WRITE.split())
    assert f"CASE WHEN t.skip_reason IS NULL THEN '{BY_EVENT[Event.WRITTEN].target}' ELSE 'skipped' END" in sql
    assert guarded_states(sql, "p.state") == {s.value for s in PENDING}
    # The probes are made only when a run of those states is overdue at all (`o`, one look each).
    assert guarded_states(sql, "o.state") == {s.value for s in PENDING}


def test_a_join_writes_its_child_run_queued_or_skipped_with_its_reason() -> None:
    sql = " ".join(runs_q.RUNS_JOIN.split())
    assert f"u.state IN ('{BY_EVENT[Event.CHAINED].target}', 'skipped')" in sql


@pytest.mark.parametrize("event", [t.event for t in TRANSITIONS if t.fence is Fence.EPOCH])
def test_each_epoch_fenced_event_s_statement_runs_in_a_fenced_transaction(event: Event) -> None:
    # The epoch fence is EPOCH_GUARD in the writer's transaction (cronos.store.epoch.fenced): each
    # function of the store that runs the event's statement opens one.
    for name, _ in APPLIED_BY[event]:
        callers = [f for f in _store_functions() if f"runs_q.{name}" in f[1]]
        assert callers, name
        for function, source in callers:
            if name == "RUNS_SKIP_QUEUED" and function.startswith("revisions."):
                continue  # handed_over: the same statement, under the job's row lock (Fence.JOB)
            assert "fenced(" in source, f"{function} runs {name} ({event}) outside a fenced transaction"


def _store_functions() -> list[tuple[str, str]]:
    """Every function of the store modules (module.name) and its source."""
    found = []
    for path in sorted(Path(store.__path__[0]).glob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((f"{path.stem}.{node.name}", ast.get_source_segment(source, node) or ""))
    return found
