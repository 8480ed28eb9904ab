"""GET /api/jobs-file.schema.json: the JSON Schema of a `cronos apply` jobs file.

Generated from the job create body (api.schemas.JobCreate) like the OpenAPI document, so a
file and POST /api/jobs cannot drift apart. `cronos apply` validates files against it, and
editors can too (`# yaml-language-server: $schema=<api>/api/jobs-file.schema.json`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from api.openapi import kind_variants
from api.routing import Route
from api.schemas import JobCreate
from api.schemas_rules import CalendarIn
from cronos import namespaces
from cronos.models import GROUP_PATTERN, ManagedBy
from cronos.payloads import PAYLOAD_TYPES
from cronos.rules import NAME_PATTERN

PATH = "/api/jobs-file.schema.json"
_DEFS = "#/$defs/{name}"
# Set by apply itself, never written in a file.
_NOT_IN_FILE = ("managed_by",)


# `concurrency_groups: {name: limit}`: created or set before the jobs (cronos.client.apply_groups).
_GROUPS = {
    "type": "object",
    "description": "concurrency groups the jobs name, each with its limit (runs of its jobs at once, at most)",
    "propertyNames": {"pattern": GROUP_PATTERN},
    "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 100_000},
}


def jobs_file_schema() -> dict[str, Any]:
    """A top-level `jobs:` list of job create bodies (without what apply sets itself)."""
    types: list[type[Any]] = [JobCreate, *PAYLOAD_TYPES.values(), CalendarIn]
    refs, defs = msgspec.json.schema_components(types, ref_template=_DEFS)
    kind_variants(defs, dict(zip(types, refs, strict=True)), ref=_DEFS)
    job = defs["JobCreate"]
    for name in _NOT_IN_FILE:
        job["properties"].pop(name)
    defs.pop(ManagedBy.__name__, None)
    job["title"] = "Job"
    job["description"] = (
        "A job, in the fields of POST /api/jobs. `name` is its identity; `status` (active or paused) "
        "pauses or resumes it; a left-out field has its default. `kind` (default task) chooses the payload's shape."
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Cronos jobs file",
        "description": "`cronos apply -f FILE|DIR` makes the cluster's jobs match the file(s).",
        "type": "object",
        "properties": {
            "jobs": {"type": "array", "items": refs[0]},
            "namespace": {
                "type": "string",
                "pattern": namespaces.PATTERN,
                "description": f"the namespace the jobs live in (default: --namespace, $CRONOS_NAMESPACE, else "
                f"{namespaces.DEFAULT}); --prune deletes only there",
            },
            "concurrency_groups": _GROUPS,
            # `calendars: {name: days}`: created or replaced before the jobs (cronos.client.apply_groups).
            "calendars": {
                "type": "object",
                "description": "calendars the jobs name, each its days (as PUT /api/calendars/{name})",
                "propertyNames": {"pattern": NAME_PATTERN},
                "additionalProperties": refs[-1],
            },
        },
        "required": ["jobs"],
        "additionalProperties": False,
        "$defs": defs,
    }


async def jobs_file(request: web.Request) -> web.Response:
    if "doc" not in _CACHE:
        _CACHE["doc"] = msgspec.json.encode(jobs_file_schema())
    return web.Response(body=_CACHE["doc"], content_type="application/json")


_CACHE: dict[str, bytes] = {}

# Public like /openapi.json: the shape of a file, no data.
ROUTES = (
    Route("GET", PATH, jobs_file, "JSON Schema of a `cronos apply` jobs file (YAML or JSON)", scope="public"),
)  # fmt: skip
