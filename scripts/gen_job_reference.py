"""Write docs/reference/jobs.md from the OpenAPI document's job schemas, so the page cannot drift.

Usage: .venv/bin/python scripts/gen_job_reference.py [--check]

Every field, type, default and limit comes from `api.openapi.build_spec` (the document
`GET /openapi.json` serves). A field the schema does not describe takes its sentence from NOTES
below; a field with neither, or a note for a field the schema no longer has, stops the script.
`--check` writes nothing and exits 1 when the committed page differs (tests/docs/test_job_reference.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "reference" / "jobs.md"

# What the schema does not say itself (no `description` in api/schemas.py or cronos/payloads.py).
NOTES: dict[str, dict[str, str]] = {
    "JobCreate": {
        "kind": "what the job runs: a registered Python function (`task`), a signed HTTP request (`http`) "
        "or a command (`shell`, refused unless the operator enables it); it chooses the payload's shape",
        "max_retries": "attempts after a failed one (each after `retry_backoff_s`, doubled per attempt)",
        "concurrency_policy": "what a tick does while the job's previous run still runs: `forbid` waits briefly, "
        "then skips; `allow` runs both; `replace` ends the running one; `buffer_one` lets one wait; "
        "`buffer_all` lets every one wait its turn",
        "misfire_policy": "ticks late beyond `misfire_grace_s`: `skip` each, `run_once` for the lot, `run_all`",
        "status": "`paused` stops its ticks until resumed (ticks while paused are not caught up)",
        "managed_by": "set by `cronos apply` on the jobs it keeps in step with a file; "
        "`null` releases the job from apply; not a field of a jobs file",
        "hosts": "runs on every host: a run per live executor of its queue each tick (`{}`), on `count` of them, "
        "or on those whose `CRONOS_EXECUTOR_LABELS` hold `label`; needs `concurrency_policy: allow` and "
        "`max_retries: 0` (docs/every-host.md); absent: one run per tick",
        "expectations": "what the job is expected to do, each optional: the leader judges every run by those "
        "of the revision that planned it and tells of each breach as a job event (docs/expectations.md)",
        "chain": "when the job runs after its `parents`: each edge on `completed` (the default), `failed` or "
        "`ended`, and a join of the parents per tick (docs/chains.md); null: after each successful parent run",
    },
    "JobOut": {
        "id": "the job's id (never reused)",
        "status": "`completed` or `expired`: the job ended (its window, `max_runs`, a one-off)",
        "last_scheduled_for": "the newest tick the leader wrote to the ledger",
        "created_at": "when it was created",
        "updated_at": "when it last changed",
        "next_run_at": "its next fire time (null: none)",
        "webhook_secret": "an http job's signing secret (`whsec_...`), only in the answer to its creation "
        "and to `POST /api/jobs/{id}/rotate-secret`",
        "last_run": "its newest run, only on `GET /api/jobs/{id}`",
    },
    "TaskPayload": {
        "action": "the name a function was registered under with `@cronos.task`",
    },
    "HttpPayload": {
        "method": "the request's method",
        "headers": "request headers; values of sensitive names are write-only (shown as `***`)",
        "body": "the request body: a string as is, anything else as JSON",
        "timeout_s": "the request's timeout, at most the job's `timeout_s` (default: the job's)",
        "expect_status": "the status (or statuses) that mean success (default: any 2xx)",
        "follow_redirects": "follow redirects (each hop checked by the SSRF guard), "
        "at most `CRONOS_HTTP_MAX_REDIRECTS`",
        "secrets_follow_redirects": "let the job's secrets follow redirects to other paths of its own "
        "origin and `Host` (never to another origin); off, a hop to another path carries none",
    },
    "Expectations": {
        "breaker": "the job's circuit breaker (below; docs/breaker.md): pause after failures in a row, and a "
        "canary run that resumes it",
    },
    "ShellPayload": {
        "argv": "the command and its arguments (no shell unless you name one)",
        "env": "variables for the command, besides `PATH`, `HOME` and `LANG`",
        "cwd": "the working directory",
    },
}
_SHORT_PATTERN = 40  # longer patterns (names, URLs) are described in words instead


def spec() -> dict[str, Any]:
    from api.app import ROUTES
    from api.openapi import build_spec

    return build_spec(ROUTES, "reference")


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in prop:
        kinds = [_type(p) for p in prop["anyOf"]]
        return " or ".join(kinds)
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "null":
        return "null"
    if kind == "array":
        return f"array of {_type(prop.get('items', {}))}"
    if prop.get("format") == "date-time":
        return "instant (RFC 3339)"
    return str(kind)


def _limits(prop: dict[str, Any]) -> str:
    inner = next((p for p in prop.get("anyOf", []) if p.get("type") != "null"), prop)
    limits = []
    for key, text in (
        ("minLength", "length ≥ {}"),
        ("maxLength", "length ≤ {}"),
        ("exclusiveMinimum", "> {}"),
        ("minimum", "≥ {}"),
        ("maximum", "≤ {}"),
        ("minItems", "≥ {} items"),
        ("maxItems", "≤ {} items"),
    ):
        if key in inner:
            limits.append(text.format(inner[key]))
    pattern = inner.get("pattern")
    if pattern and len(pattern) <= _SHORT_PATTERN and pattern != "^[^\\x00]*$":
        limits.append(f"matches `{pattern}`")
    return ", ".join(limits)


def _meaning(schema: str, name: str, prop: dict[str, Any]) -> str:
    inner = next((p for p in prop.get("anyOf", []) if "description" in p), prop)
    note = NOTES.get(schema, {}).get(name)
    text = note or inner.get("description")
    if not text:
        raise SystemExit(f"{schema}.{name}: the schema has no description; add one, or a note to NOTES")
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(schema: dict[str, Any], name: str, prop: dict[str, Any]) -> str:
    if name in schema.get("required", []):
        return "required"
    if "default" in prop:
        return f"`{json.dumps(prop['default'])}`"
    return "—"


def _table(components: dict[str, Any], schema_name: str, only: list[str] | None = None) -> list[str]:
    schema = components[schema_name]
    lines = ["| field | type | default | limits | meaning |", "|---|---|---|---|---|"]
    for name, prop in schema["properties"].items():
        if only is not None and name not in only:
            continue
        row = [f"`{name}`", _type(prop), _default(schema, name, prop), _limits(prop), _meaning(schema_name, name, prop)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def render(document: dict[str, Any]) -> str:
    components = document["components"]["schemas"]
    for schema, notes in NOTES.items():
        gone = sorted(set(notes) - set(components[schema]["properties"]))
        if gone:
            raise SystemExit(f"NOTES names fields {schema} no longer has: {gone}")
    create = components["JobCreate"]
    shapes = [variant["title"] for variant in create["allOf"][0]["oneOf"]]
    job_out = components["JobOut"]["properties"]
    read_only = [name for name in job_out if name not in create["properties"]]
    out = [
        "# Job reference",
        "",
        "<!-- Generated by scripts/gen_job_reference.py from the OpenAPI document (GET /openapi.json);",
        "     do not edit: run the script. tests/docs/test_job_reference.py checks it is current. -->",
        "",
        "What `POST /api/jobs` takes, a jobs file's job holds (`cronos apply`), and `cronos jobs create`",
        "takes as options (`--timeout-s 30`). `PATCH /api/jobs/{id}` takes any of them; a PATCH that",
        "sets one of `cron_expression`, `every` and `run_at` clears the others. Every API serves the whole",
        "document, with every constraint, at `/openapi.json`.",
        "",
        f"A job is one of: {', '.join(shapes)} — exactly one of `cron_expression`, `every` and `run_at`"
        " (intervals: [Intervals](../intervals.md)).",
        "",
        "## Fields",
        "",
        *_table(components, "JobCreate"),
        "",
        "## Payload of each kind",
        "",
    ]
    for kind, schema_name in (("task", "TaskPayload"), ("http", "HttpPayload"), ("shell", "ShellPayload")):
        schema = components[schema_name]
        extra = "; any other key is the function's input" if schema.get("additionalProperties") is not False else ""
        out += [f"### `{kind}`", "", f"`{schema_name}`{extra}.", "", *_table(components, schema_name), ""]
    out += [
        "## Expectations",
        "",
        "`expectations` (each field optional; docs/expectations.md):",
        "",
        *_table(components, "Expectations"),
        "",
        "### `breaker`",
        "",
        "`expectations.breaker` (each field optional; docs/breaker.md):",
        "",
        *_table(components, "Breaker"),
        "",
    ]
    out += [
        "## Chain",
        "",
        "`chain` (docs/chains.md), with `join` (`ChainJoin`):",
        "",
        *_table(components, "Chain"),
        "",
        *_table(components, "ChainJoin"),
        "",
    ]
    out += [
        "## What the API adds",
        "",
        "A job as the API returns it (`JobOut`) holds the fields above and these:",
        "",
        *_table(components, "JobOut", only=[*read_only, "status"]),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    text = render(spec())
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(REPO)} is out of date: run scripts/gen_job_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
