"""schemathesis against a live API (real PostgreSQL and Redis): every operation of /openapi.json is
called with data generated from the document, seeded, and every response must be no 5xx, match its
documented status codes and schemas, and valid data must be accepted.

The API runs in its own thread and event loop: schemathesis calls it synchronously. No token
exists at first, and the client is on loopback: protected mode lets it create an admin token, which
every call then sends (the run creates tokens itself, which ends protected mode).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
import zoneinfo
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import hypothesis
import msgspec
import pytest
import requests
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from api.bodies import MAX_ID, check_instant, convert, encode_cursor
from api.routes_calendars import check_blackout, check_calendar
from api.routes_run_views import time_range
from api.routes_schedule import query_time
from api.routes_ticks import window
from api.schemas_rules import BlackoutCreate, CalendarCreate, CalendarIn
from api.service import ApiService
from cronos import backfill, instants
from cronos.errors import InvalidInput
from cronos.netguard import literal_host_refusal
from cronos.notify.mail import address_problem
from cronos.settings import Settings

BUDGET_S = 240.0  # the whole run (40-100 s on a quiet 2-core box; more under load)
EXAMPLES = 60  # per operation and id: a random one, then one that exists (about 60 operations)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    positive_data_acceptance,
]

# Formats the document names but JSON Schema cannot check: how to draw valid values of them.
CRONS = ["*/5 * * * *", "0 3 * * *", "@hourly", "@daily", "0 30 9 * * 1-5", "*/10 * * * * *", "15 2 1 * *",
         "0 9-17 * * MON-FRI", "*/60 * * * *"]  # fmt: skip
DURATIONS = ["1s", "90s", "90m", "1h30m", "2d", "1d12h", "366d", "5400"]  # `every` (cronos.interval)
# A job's `schedules` as the preview's query takes them (JSON).
SCHEDULES = ['[{"cron": "0 10 * * 6"}]', '[{"every": "90m"}, {"cron": "0 8 * * 1-5", "timezone": "UTC"}]', "[]"]
ZONES = [*sorted(z for z in zoneinfo.available_timezones() if "/" in z)[:200], "UTC"]


def _one_schedule(query: dict[str, Any]) -> bool:
    if "anchor" in query:
        check_instant(query_time(query["anchor"], zoneinfo.ZoneInfo("UTC"), "anchor"), "anchor")
    return ("cron_expression" in query) != ("every" in query) and ("anchor" not in query or "every" in query)


def _register_formats() -> None:
    schemathesis.openapi.format("cron", st.sampled_from(CRONS))
    schemathesis.openapi.format("cronos-duration", st.sampled_from(DURATIONS))
    schemathesis.openapi.format("iana-time-zone", st.sampled_from(ZONES))
    schemathesis.openapi.format("cronos-cursor", st.integers(0, MAX_ID).map(encode_cursor))
    schemathesis.openapi.format("cronos-schedules", st.sampled_from(SCHEDULES))


@contextlib.contextmanager
def api_in_thread(settings: Settings) -> Iterator[str]:
    """An ApiService on 127.0.0.1 (ephemeral port) served by a loop in its own thread."""
    ready = threading.Event()
    box: dict[str, ApiService] = {}
    loop = asyncio.new_event_loop()

    async def serve() -> None:
        async with ApiService(settings, host="127.0.0.1") as service:
            box["service"] = service
            ready.set()
            await service.run()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), name="api", daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "the API did not start"
        yield f"http://127.0.0.1:{box['service'].port}"
    finally:
        if "service" in box:
            loop.call_soon_threadsafe(box["service"].stop)
        thread.join(30)
        loop.close()


def _rules_fit(ctx: schemathesis.HookContext, body: dict[str, Any]) -> bool:
    """A calendar's ranges and a blackout's one form of window relate fields, which no schema says."""
    path = "" if ctx.operation is None else ctx.operation.path
    if path == "/api/jobs/{id}" and isinstance(body, dict) and body.get("schedules") and "run_at" not in body:
        return False  # whether a job's further schedules fit depends on the stored job: a one-off has none
    try:
        if path == "/api/blackouts":
            check_blackout(convert(body, BlackoutCreate))
        elif path.startswith("/api/calendars"):
            check_calendar("x", convert(body, CalendarCreate if path == "/api/calendars" else CalendarIn))
    except InvalidInput:
        return False
    except msgspec.ValidationError:
        return True  # not even the schema's: the API's 422 is what the document promises
    return True


_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\dT")


def _instants_stored(value: Any) -> bool:
    """Every date-time of a body is one PostgreSQL gives back exactly (cronos.instants): the
    format's years 1-9999 say less than the API keeps; test_instants covers the rest."""
    if isinstance(value, dict):
        return all(_instants_stored(v) for v in value.values())
    if isinstance(value, list):
        return all(_instants_stored(v) for v in value)
    if isinstance(value, str) and _DATE_TIME.match(value):
        try:
            return instants.usable(datetime.fromisoformat(value))
        except ValueError:
            return True
    return True


def _backfill_range_ok(body: Any) -> bool:
    try:
        start, end = (instants.check(datetime.fromisoformat(body[k]), k).astimezone(UTC) for k in ("from", "to"))
        backfill.check_range(start, end, datetime.now(UTC))
    except (InvalidInput, ValueError, KeyError, TypeError):
        return False
    return True


def _schema(base: str, live: Settings) -> Any:
    """The document the API serves, with the data no schema can describe left out."""
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    # Our token, not made-up ones: a 401 is accepted by the checks, so it would test nothing.
    # NUL is refused in every text of a job (documented where the document can say it); payload
    # parts of any shape (`body`, a task's inputs) cannot say it, so none is generated.
    schema.config.generation.update(with_security_parameters=False, allow_x00=False)

    @schema.hook
    def filter_body(ctx: schemathesis.HookContext, body: Any) -> bool:
        # The SSRF guard's refusals depend on CRONOS_HTTP_ALLOW_NETS, which no schema can
        # know (the url's description says it); test_api_input covers them.
        if not _instants_stored(body):
            return False  # outside the stored range: test_instants covers every such field
        if isinstance(body, dict) and "expires_at" in body:
            return False  # "in the future" depends on the clock; test_api_auth covers it
        if isinstance(body, dict) and body.get("parents"):
            return False  # which jobs exist (and make no cycle) depends on the data; test_chains covers it
        chain = body.get("chain") if isinstance(body, dict) else None
        if isinstance(chain, dict) and (chain.get("on") or chain.get("join") is not None):
            return False  # edges and joins name the job's parents, stored or sent: test_joins covers them
        if isinstance(body, dict) and body.get("hosts") is not None:
            return False  # per-host needs `allow`, stored or sent: test_api_every_host covers it
        if isinstance(body, dict) and body.get("spread") is not None:
            return False  # a spread must be shorter than the schedule's gaps, stored or sent: test_spread_api
        if isinstance(body, dict) and body.get("concurrency_group"):
            return False  # which groups exist depends on the data; test_api_groups covers it
        if ctx.operation is not None and ctx.operation.path.endswith("/trigger") and body:
            return False  # inputs fit the job's stored payload and schedule, not a schema; test_trigger_inputs
        if isinstance(body, dict) and (body.get("calendars") or "until" in body or not _rules_fit(ctx, body)):
            return False  # calendars that exist, a future `until`, one form of window: test_calendars covers them
        if ctx.operation is not None and ctx.operation.path.endswith("/backfill"):
            # `from` before `to`, in the past: the clock's; a pace within CRONOS_BACKFILL_MAX_PER_S,
            # a setting no schema knows: test_backfill covers both.
            pace = body.get("pace") if isinstance(body, dict) else None
            return _backfill_range_ok(body) and (not isinstance(pace, int | float) or pace <= live.backfill_max_per_s)
        payload = body.get("payload") if isinstance(body, dict) else None
        url = payload.get("url") if isinstance(payload, dict) else None
        if ctx.operation is not None and ctx.operation.path.startswith("/api/channels") and isinstance(body, dict):
            smtp = body.get("smtp")
            hosts = [body.get("url"), f"smtp://{smtp.get('host')}" if isinstance(smtp, dict) else None]
            addresses = [smtp.get("from"), *(smtp.get("to") or [])] if isinstance(smtp, dict) else []
            # An address an email cannot carry intact (a comment, an encoded word): test_api_channels.
            return all(
                literal_host_refusal(h, live.http_allow_nets) is None for h in hosts if isinstance(h, str)
            ) and all(address_problem(a) is None for a in addresses if isinstance(a, str))
        return not isinstance(url, str) or literal_host_refusal(url, live.http_allow_nets) is None

    @schema.hook
    def filter_query(ctx: schemathesis.HookContext, query: Any) -> bool:
        # A ticks window's bounds (`from` not after `to`, at most 7 days) relate two parameters
        # and the clock, which no schema can say; test_api_ticks covers them.
        # So do the runs view's (`to` after `from`).
        if ctx.operation is None or not isinstance(query, dict):
            return True
        if ctx.operation.path == "/api/schedule/preview" and (query.get("calendars") or query.get("spread")):
            return False  # calendars that exist, a spread shorter than the gaps: test_calendars, test_spread_api
        try:
            if ctx.operation.path.endswith("/ticks"):
                window(query.get("from"), query.get("to"), datetime.now(UTC))
            elif ctx.operation.path == "/api/runs":
                time_range(query.get("from"), query.get("to"))
            elif ctx.operation.path == "/api/schedule/preview":
                return _one_schedule(query)  # exactly one of cron_expression and every: test_intervals
        except InvalidInput:
            return False
        return True

    return schema


@pytest.mark.timeout(300)
def test_the_api_keeps_the_promises_of_its_openapi_document(settings: Settings) -> None:
    _register_formats()
    # Shell allowed so shell payloads are judged by their schema, not refused by policy.
    live = msgspec.structs.replace(settings, allow_shell=True)
    with api_in_thread(live) as base:
        created = requests.post(f"{base}/api/tokens", json={"name": "schemathesis", "scopes": ["admin"]}, timeout=10)
        assert created.status_code == 201, created.text
        auth = {"Authorization": f"Bearer {created.json()['token']}"}
        schema = _schema(base, live)
        # A follow streams until its run ends, and the run here never starts: tested on its own
        # (tests/integration/test_api_run_output.py).
        operations = [result.ok() for result in schema.get_all_operations() if not result.ok().path.endswith("/follow")]
        assert len(operations) >= 20
        # Ids that exist, so operations on one job or run get past 404 too; deletes go last.
        job = requests.post(f"{base}/api/jobs", json={"name": "target", "cron_expression": "@daily",
                            "payload": {"action": "x"}}, headers=auth, timeout=10).json()  # fmt: skip
        run = requests.post(f"{base}/api/jobs/{job['id']}/trigger", headers=auth, timeout=10).json()
        operations.sort(key=lambda op: op.method.upper() == "DELETE")
        plans = []
        for operation in operations:
            plans.append((operation, None))
            if "{id}" in operation.path:
                plans.append((operation, {"id": run["id"] if operation.path.startswith("/api/runs") else job["id"]}))
        deadline = time.monotonic() + BUDGET_S
        failures: list[str] = []
        statuses: Counter[tuple[str, int]] = Counter()
        for operation, path_parameters in plans:
            if time.monotonic() > deadline:
                pytest.fail(f"schemathesis run over its {BUDGET_S:.0f} s budget at {operation.label}")

            @hypothesis.settings(
                max_examples=EXAMPLES,
                derandomize=True,  # seeded: the same cases every run
                deadline=None,
                database=None,
                suppress_health_check=list(hypothesis.HealthCheck),
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
            )
            @hypothesis.given(case=operation.as_strategy(path_parameters=path_parameters))
            def run(case: schemathesis.Case) -> None:
                response = case.call_and_validate(base_url=base, headers=auth, checks=CHECKS)
                statuses[case.operation.label, response.status_code] += 1

            try:
                run()
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - collect all, then report
                failures.append(f"{operation.label}: {exc}")
        assert not failures, "\n\n".join(failures)
    print(sorted(statuses.items()))
    # The run reached past validation and authentication: jobs were created, changed and read back.
    for operation, status in (("POST /api/jobs", 201), ("PATCH /api/jobs/{id}", 200), ("GET /api/jobs", 200),
                              ("GET /api/tokens/history", 200)):  # fmt: skip
        assert statuses[operation, status] > 0, (operation, status, statuses)
    # The hook takes a trigger's secret, not the API token: its 401s are its own (test_api_hooks).
    assert not any(status == 401 and op != "POST /hooks/{id}" for op, status in statuses), statuses


ADMIN_TOKEN = "stateful-admin-" + "s" * 32
STATEFUL_SUITES = 6  # seeds
STATEFUL_EXAMPLES = 40  # scenarios per suite (~1,650 calls, ~15 s here)
STATEFUL_STEPS = 12  # calls per scenario at most


@pytest.mark.timeout(200)
def test_stateful_sequences_of_calls_find_no_server_error(settings: Settings) -> None:
    """schemathesis' stateful mode: sequences of calls where one's response feeds the next (a job
    created, then changed, triggered, its runs read, deleted), bounded so it stays well under a minute.
    The document's links (api.openapi._LINKS: a created job's id, a queued run's id) and those
    schemathesis infers from the responses' schemas say which response feeds which call."""
    _register_formats()
    # CRONOS_ADMIN_TOKEN: a sequence may revoke any stored token (the links lead there), not this one.
    live = msgspec.structs.replace(settings, allow_shell=True, admin_token=ADMIN_TOKEN)
    with api_in_thread(live) as base:
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        schema = _schema(base, live)
        schema.config.phases.stateful.max_steps = STATEFUL_STEPS
        statuses: Counter[tuple[str, int]] = Counter()
        errors: list[str] = []

        class Workflow(schema.as_state_machine()):  # type: ignore[misc]
            def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
                return {"base_url": base, "headers": auth}

            def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
                # Collected, not raised: a sequence replayed against the live (changed) data would
                # not draw the same steps again, which hypothesis reports as flaky, not the 5xx.
                statuses[case.operation.label, response.status_code] += 1
                if response.status_code >= 500:
                    errors.append(f"{case.operation.label} -> {response.status_code}: {case.as_curl_command()}")

        settings_ = hypothesis.settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=STATEFUL_STEPS,
            deadline=None,
            database=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            phases=[hypothesis.Phase.generate],
        )
        # Seeded suites, as schemathesis' own runner does: a suite ends early when hypothesis finds it
        # cannot replay a sequence (the API's data changed under it: FlakyStrategyDefinition); every
        # call made until then was checked, and the next suite goes on.
        for seed in range(STATEFUL_SUITES):
            with contextlib.suppress(hypothesis.errors.Flaky):
                hypothesis.seed(seed)(Workflow).run(settings=settings_)
    print(sorted(statuses.items()))
    assert not errors, "\n".join(errors)
    # Sequences happened: a job created, then used by id by a later call.
    assert statuses["POST /api/jobs", 201] > 0, statuses
    assert sum(n for (label, status), n in statuses.items() if "{id}" in label and status < 400) > 0, statuses
