"""Pure parts of the API: body decoding errors, the error table, cursors, OpenAPI generation."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import msgspec
import pytest
from aiohttp import web

from api.app import ROUTES
from api.bodies import MAX_ID, JobPolicy, check_job, decode_cursor, decode_run_cursor, encode_cursor, encode_run_cursor
from api.errors import ERRORS, INTERNAL, MalformedBody, invalid_input, kind_for, kind_of
from api.openapi import CURSOR_SCHEMA, build_spec
from api.schemas import JobCreate, JobOut, JobPatch, RunOut
from cronos.errors import BackendUnavailable, Conflict, InvalidInput, InvalidSchedule, NotFound
from cronos.models import Job, Run, RunSummary
from cronos.store.jobs import WRITABLE

POLICY = JobPolicy(allow_nets=(), allow_shell=False, payload_max_bytes=65_536)


def _error(raw: bytes, cls: type[object] = JobCreate) -> InvalidInput:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(raw, type=cls)
    return invalid_input(info.value)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"name": "", "cron_expression": "* * * * *", "payload": {}}', "$.name"),
        (b'{"name": "a", "cron_expression": "* * * * *"}', "$.payload"),
        (b'{"name": "a", "cron_expression": "* * * * *", "payload": {}, "x": 1}', "$.x"),
        (b'{"name": "a", "cron_expression": "* * * * *", "payload": {}, "timeout_s": true}', "$.timeout_s"),
        (b"[]", "$"),
    ],
)
def test_validation_errors_name_the_field(raw: bytes, field: str) -> None:
    assert _error(raw).field == field


def test_payload_errors_are_rebased_under_payload() -> None:
    with pytest.raises(InvalidInput) as info:
        check_job(
            {"name": "a", "cron_expression": "* * * * *", "timezone": "UTC", "kind": "task", "payload": {}}, POLICY
        )
    assert info.value.field == "$.payload.action"
    with pytest.raises(InvalidInput) as info:
        check_job(
            {
                "name": "a",
                "cron_expression": "* * * * *",
                "timezone": "UTC",
                "kind": "http",
                "payload": {"url": "https://x", "headers": {"a": 1}},
            },
            POLICY,
        )
    assert info.value.field == "$.payload.headers[...]"  # msgspec names a dict value so
    with pytest.raises(InvalidSchedule) as sched:
        check_job(
            {
                "name": "a",
                "cron_expression": "* * * * *",
                "timezone": "Not/AZone",
                "kind": "task",
                "payload": {"action": "x"},
            },
            POLICY,
        )
    assert sched.value.field == "$.timezone"


def test_patch_keeps_only_the_fields_sent() -> None:
    patch = msgspec.json.decode(b'{"max_retries": 2, "payload": {"action": "y"}}', type=JobPatch)
    assert patch.changes() == {"max_retries": 2, "payload": {"action": "y"}}
    assert msgspec.json.decode(b"{}", type=JobPatch).changes() == {}


def test_request_bodies_cover_exactly_the_writable_columns() -> None:
    assert JobCreate.__struct_fields__ == JobPatch.__struct_fields__
    # The namespace is the collection's (`POST /api/jobs?namespace=`), not the body's; never changed.
    assert set(JobCreate.__struct_fields__) | {"namespace"} == set(WRITABLE) <= set(Job.__struct_fields__)


def test_response_bodies_derive_from_the_models() -> None:
    assert issubclass(JobOut, Job) and issubclass(RunOut, RunSummary) and issubclass(Run, RunSummary)
    derived = {"start_delay_ms", "held_back_ms", "waited_ms"}  # cronos.delays, from the run's own times
    derived |= {"inputs"}  # a manual run's overrides, from run_inputs (cronos.store.inputs)
    derived |= {"unserved"}  # why a queued run waits, from the executors' presence (api.task_routing)
    derived |= {"usage"}  # what its work used, from run_usage (cronos.store.run_usage)
    assert set(RunOut.__struct_fields__) == set(Run.__struct_fields__) - {"lease_until"} | derived


def test_every_documented_error_has_a_row_in_the_table() -> None:
    for route in ROUTES:
        for error in route.errors:
            assert kind_for(error) is not INTERNAL, (route.path, error)


def test_the_error_table() -> None:
    assert kind_of(MalformedBody("x")).status == 400
    assert kind_of(InvalidSchedule("$.timezone", "bad")).status == 422  # a subclass inherits its parent's row
    assert kind_of(NotFound("x")).status == 404
    assert kind_of(Conflict("x")).status == 409
    assert kind_of(BackendUnavailable("redis", "down")).status == 503
    assert kind_of(web.HTTPRequestEntityTooLarge(1, 2)).status == 413
    assert kind_of(RuntimeError("bug")) is INTERNAL
    assert len({k.slug for k in ERRORS.values()}) == len({k.status for k in ERRORS.values()})


def test_cursor_round_trip_and_garbage() -> None:
    for value in (1, 42, 2**62):
        assert decode_cursor(encode_cursor(value)) == value
    assert decode_cursor(None) is None and decode_cursor("") is None
    for garbage in ("!!", "Zm9vOmJhcg", "aWQ6LTE", "aWQ6"):  # not base64; "foo:bar"; "id:-1"; "id:"
        with pytest.raises(InvalidInput) as info:
            decode_cursor(garbage)
        assert info.value.field == "cursor"


def test_run_cursor_carries_tick_and_id() -> None:
    tick = datetime(2026, 3, 29, 1, 30, 0, 123456, tzinfo=UTC)
    assert decode_run_cursor(encode_run_cursor(tick, 2**62)) == (tick, 2**62)
    old = datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert decode_run_cursor(encode_run_cursor(old, 1)) == (old, 1)
    assert decode_run_cursor(encode_cursor(42)) == (None, 42)  # a cursor from before 0018
    assert decode_run_cursor(None) is None
    assert len(encode_run_cursor(datetime(9999, 12, 30, tzinfo=UTC), MAX_ID)) <= CURSOR_SCHEMA["maxLength"]
    for garbage in (
        b"t" + (2**62).to_bytes(8, "big") + (1).to_bytes(8, "big"),  # far past year 9999
        b"t" + (1).to_bytes(8, "big") + (2**64 - 1).to_bytes(8, "big"),  # past bigint
        b"t" + (1).to_bytes(8, "big"),  # cut short
        b"job:1",
    ):
        with pytest.raises(InvalidInput) as info:
            decode_run_cursor(base64.urlsafe_b64encode(garbage).decode())
        assert info.value.field == "cursor"
    with pytest.raises(InvalidInput):  # a run cursor is no cursor of other listings
        decode_cursor(encode_run_cursor(tick, 1))


def test_openapi_is_built_from_the_route_table() -> None:
    spec = build_spec(ROUTES, "test")
    ops = [(m, p) for p, methods in spec["paths"].items() for m in methods]
    assert len(ops) == len(ROUTES)
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            assert "500" in op["responses"] and "405" in op["responses"], (method, path)
            if "{id}" in path:
                assert op["parameters"][0] == {
                    "name": "id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
                }
    refs = msgspec.json.encode(spec).decode()
    for name in spec["components"]["schemas"]:
        assert f"#/components/schemas/{name}" in refs


def test_openapi_document_is_valid_openapi_3_1() -> None:
    validator = pytest.importorskip("openapi_spec_validator", reason="needs openapi-spec-validator (test extra)")
    validator.validate(build_spec(ROUTES, "test"))


def test_openapi_is_precise_about_kinds_cursors_and_scopes() -> None:
    spec = build_spec(ROUTES, "test")
    schemas = spec["components"]["schemas"]
    for name in ("JobCreate", "JobPatch", "JobOut"):
        refs = [v.get("$ref") for v in schemas[name]["oneOf"]]
        assert {"#/components/schemas/TaskJob", "#/components/schemas/HttpJob", "#/components/schemas/ShellJob"} <= set(
            refs
        ), name
    assert schemas["JobOut"]["discriminator"]["propertyName"] == "kind"
    assert schemas["HttpJob"]["properties"]["payload"] == {"$ref": "#/components/schemas/HttpPayload"}
    headers = schemas["HttpPayload"]["properties"]["headers"]
    assert "pattern" in headers["propertyNames"] and "pattern" in headers["additionalProperties"]
    assert schemas["ShellPayload"]["properties"]["env"]["propertyNames"]["not"] == {"pattern": "^(PATH$|LD_|PYTHON)"}
    assert spec["components"]["securitySchemes"]["bearer"] == {**spec["components"]["securitySchemes"]["bearer"],
                                                               "type": "http", "scheme": "bearer"}  # fmt: skip
    ops = {(m.upper(), p): op for p, methods in spec["paths"].items() for m, op in methods.items()}
    assert ops["GET", "/health"]["security"] == [] and "401" not in ops["GET", "/health"]["responses"]
    assert ops["POST", "/api/jobs"]["security"] == [{"bearer": ["write"]}]
    assert ops["GET", "/api/jobs"]["security"] == [{"bearer": ["read"]}]
    assert {"401", "403", "408", "413", "415", "422"} <= set(ops["POST", "/api/jobs"]["responses"])
    assert "415" in ops["POST", "/api/jobs/{id}/trigger"]["responses"]
    assert "408" not in ops["POST", "/api/jobs/{id}/resume"]["responses"]  # no body read
    trigger = ops["POST", "/api/jobs/{id}/trigger"]  # an optional body (run now with inputs)
    assert trigger["requestBody"]["required"] is False and {"408", "409", "422"} <= set(trigger["responses"])
    cursor = next(p for p in ops["GET", "/api/jobs"]["parameters"] if p["name"] == "cursor")
    assert cursor["schema"]["format"] == "cronos-cursor" and "next_cursor" in cursor["schema"]["description"]


def test_openapi_describes_the_channels_audit_trail_as_the_tokens_one() -> None:
    spec = build_spec(ROUTES, "test")
    ops = {(m.upper(), p): op for p, methods in spec["paths"].items() for m, op in methods.items()}
    channels, tokens = ops["GET", "/api/channels/history"], ops["GET", "/api/tokens/history"]
    assert channels["security"] == tokens["security"] == [{"bearer": ["admin"]}]
    assert channels["responses"]["200"] == tokens["responses"]["200"]  # the same AuditList
    assert [p["name"] for p in channels["parameters"]] == [p["name"] for p in tokens["parameters"]]
