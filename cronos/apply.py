"""Jobs as code: what `cronos apply` must do to make the cluster's jobs match a jobs file.

Pure: no I/O. A file's text becomes validated jobs (against the jobs-file schema the API
publishes, then the schedule and payload checks the API makes), and the desired jobs and
the API's current ones become a plan of actions. cronos.apply_cli reads, calls and prints.

Identity is the `name`. A field the file leaves out has the API's default, so the job
matches the file, not the file plus older edits. `status` pauses or resumes.

Secrets are write-only: the API shows them as `***`, so a changed secret in the file cannot
be seen by comparing. Apply therefore stores, in the job's `managed_by` marker, a salted
scrypt of the payload it sent (secrets included) and compares the file's payload with it;
a payload changed by any other write drops that digest (cronos.store.jobs), and the next
apply sends the file's secrets again. A second apply of the same file changes nothing.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import msgspec
import yaml

from cronos.errors import CronosError, InvalidInput
from cronos.models import PATTERN_MEANINGS, PAYLOAD_TYPES, check_payload, explain
from cronos.redact import redact_payload
from cronos.schedule import parse_schedule

TOOL = "cronos-apply"  # managed_by.tool of the jobs apply writes; --prune deletes only these
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1  # ~16 MiB, tens of ms: costly to guess a weak secret
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ApplyInvalid(CronosError):
    """A jobs file that cannot be applied; the message names the file, the job and the field."""


class Step(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    PAUSE = "pause"
    RESUME = "resume"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Desired:
    source: str  # the file it came from
    fields: dict[str, Any]  # every field of a job create body, defaults filled in

    @property
    def name(self) -> str:
        return str(self.fields["name"])


@dataclass(frozen=True, slots=True)
class Action:
    step: Step
    name: str
    job_id: int | None = None
    changed: tuple[str, ...] = ()  # what an update changes
    body: dict[str, Any] | None = field(default=None, repr=False)  # of the POST or PATCH (secrets too)
    source: str = ""


# --- reading a file -------------------------------------------------------------------


def parse(source: str, text: str) -> Any:
    """YAML (JSON is YAML) as the JSON the API will see: dates become text, keys strings."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ApplyInvalid(f"{source}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    try:
        return msgspec.json.decode(msgspec.json.encode(loaded))
    except (msgspec.EncodeError, TypeError) as exc:
        raise ApplyInvalid(f"{source}: holds a value JSON cannot carry: {exc}") from None


def _path(parts: Sequence[Any]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _reason(error: jsonschema.ValidationError) -> str:
    """What is wrong, without quoting the value (it may be a secret)."""
    rule, limit = error.validator, error.validator_value
    words = {
        "type": f"must be of type {limit}",
        "enum": f"must be one of {', '.join(map(str, limit))}" if isinstance(limit, list) else "",
        "const": f"must be {limit!r}",
        "minLength": f"must have at least {limit} character(s)",
        "maxLength": f"must have at most {limit} characters",
        "minimum": f"must be at least {limit}",
        "maximum": f"must be at most {limit}",
        "exclusiveMinimum": f"must be more than {limit}",
        "exclusiveMaximum": f"must be less than {limit}",
        "minItems": f"must have at least {limit} item(s)",
        "pattern": PATTERN_MEANINGS.get(str(limit), f"must match {limit}"),
        "not": "is not allowed here",
        "oneOf": "does not fit any kind of job (task, http or shell)",
        "required": error.message,
        "additionalProperties": error.message,
    }
    if rule == "anyOf" and error.context and all(e.validator == "type" for e in error.context):
        words["anyOf"] = f"must be of type {' or '.join(str(e.validator_value) for e in error.context)}"
    reason = words.get(str(rule)) or f"does not fit the schema ({rule})"
    note = error.schema.get("description") if isinstance(error.schema, dict) else None
    return f"{reason} ({note})" if rule in ("not", "pattern") and note and note not in reason else reason


def _kind_branch(error: jsonschema.ValidationError, defs: Mapping[str, Any]) -> int | None:
    """Which branch of a job's oneOf on `kind` the job meant (the kind-omitted one without `kind`)."""
    kind = error.instance.get("kind") if isinstance(error.instance, dict) else None
    branches = error.validator_value
    for index, branch in enumerate(branches if isinstance(branches, list) else []):
        target = defs.get(branch.get("$ref", "").rpartition("/")[2], branch)
        if (kind is None and "not" in target) or target.get("properties", {}).get("kind", {}).get("const") == kind:
            return index
    return None


def _worst(error: jsonschema.ValidationError, defs: Mapping[str, Any]) -> jsonschema.ValidationError:
    """The error to show: inside a oneOf on `kind`, the one of the branch of the job's kind."""
    while error.validator == "oneOf" and error.context:
        index = _kind_branch(error, defs)
        mine = [e for e in error.context if e.relative_schema_path and e.relative_schema_path[0] == index]
        if not mine:
            break
        error = jsonschema.exceptions.best_match(mine)
    return error


def _where(source: str, jobs: Any, parts: Sequence[Any]) -> tuple[str, Sequence[Any]]:
    """`file: job 'name'` (or `file: jobs[3]`) and the path inside that job."""
    if len(parts) >= 2 and parts[0] == "jobs" and isinstance(parts[1], int):
        job = jobs[parts[1]] if isinstance(jobs, list) else None
        name = job.get("name") if isinstance(job, dict) else None
        label = f"job {name!r}" if isinstance(name, str) else f"jobs[{parts[1]}]"
        return f"{source}: {label}", parts[2:]
    return source, parts


def _expand(value: Any, environ: Mapping[str, str], path: str) -> Any:
    """`${NAME}` in string values becomes the variable's value (`$$` is a `$`): secrets stay out of files."""
    if isinstance(value, dict):
        return {k: _expand(v, environ, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, environ, f"{path}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "$" not in value:
        return value

    def sub(match: re.Match[str]) -> str:
        if match[1] is None:
            return "$"
        if match[1] not in environ:
            raise InvalidInput(path, f"${{{match[1]}}} is not set in the environment")
        return environ[match[1]]

    return _VAR.sub(sub, value)


def _check(fields: Mapping[str, Any]) -> None:
    """The API's checks a schema cannot make: the schedule, and the payload for its kind."""
    parse_schedule(fields["cron_expression"], fields["timezone"])
    try:
        check_payload(fields["kind"], msgspec.convert(fields["payload"], PAYLOAD_TYPES[fields["kind"]]))
    except msgspec.ValidationError as exc:
        raise InvalidInput("$.payload", explain(str(exc))) from None


def desired_jobs(
    documents: Sequence[tuple[str, Any]], schema: dict[str, Any], environ: Mapping[str, str]
) -> list[Desired]:
    """Every job of every (source, parsed document), validated, `${VAR}`s expanded, defaults filled."""
    validator = jsonschema.Draft202012Validator(schema)
    properties = schema["$defs"]["JobCreate"]["properties"]
    found: list[Desired] = []
    seen: dict[str, str] = {}
    for source, document in documents:
        errors = list(validator.iter_errors(document))
        # A plain error (a bad `kind` too) before a oneOf on kind, which would blame the payload.
        error = jsonschema.exceptions.best_match([e for e in errors if e.validator != "oneOf"] or errors)
        if error is not None:
            error = _worst(error, schema["$defs"])
            jobs = document.get("jobs") if isinstance(document, dict) else None
            where, inner = _where(source, jobs, list(error.absolute_path))
            raise ApplyInvalid(f"{where}: {_path(inner)}: {_reason(error)}")
        for job in document["jobs"]:
            where = f"{source}: job {job['name']!r}"
            try:
                expanded = {k: _expand(v, environ, f"$.{k}") for k, v in job.items()}
                fields = {name: expanded.get(name, spec.get("default")) for name, spec in properties.items()}
                _check(fields)
            except InvalidInput as exc:
                raise ApplyInvalid(f"{where}: {exc}") from None
            if (other := seen.get(fields["name"])) is not None:
                raise ApplyInvalid(f"{where}: the name is also used in {other}; a name is a job's identity")
            seen[fields["name"]] = source
            found.append(Desired(source, fields))
    return found


# --- secrets ---------------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _scrypt(payload: Mapping[str, Any], salt: bytes, n: int, r: int, p: int) -> bytes:
    canonical = msgspec.json.encode(payload, order="sorted")
    return hashlib.scrypt(canonical, salt=salt, n=n, r=r, p=p, maxmem=2**26, dklen=32)


def digest(payload: Mapping[str, Any], salt: bytes) -> str:
    key = _scrypt(payload, salt, _SCRYPT_N, _SCRYPT_R, _SCRYPT_P)
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(salt)}${_b64(key)}"


def digest_matches(payload: Mapping[str, Any], stored: str | None) -> bool:
    parts = (stored or "").split("$")
    if len(parts) != 6 or parts[0] != "scrypt" or not all(p.isdigit() for p in parts[1:4]):
        return False
    n, r, p = (int(x) for x in parts[1:4])
    if (n, r, p) != (_SCRYPT_N, _SCRYPT_R, _SCRYPT_P):
        return False  # only our own parameters: a stored value must not choose the work we do
    try:
        salt, key = base64.b64decode(parts[4], validate=True), base64.b64decode(parts[5], validate=True)
    except ValueError:
        return False
    return hmac.compare_digest(_scrypt(payload, salt, n, r, p), key)


def has_secrets(kind: str, payload: Mapping[str, Any]) -> bool:
    return redact_payload(kind, dict(payload)) != payload


# --- the plan ----------------------------------------------------------------------------


def _managed(job: Mapping[str, Any]) -> bool:
    marker = job.get("managed_by")
    return isinstance(marker, dict) and marker.get("tool") == TOOL


def _marker(want: Desired, salt: bytes) -> dict[str, Any]:
    kind, payload = want.fields["kind"], want.fields["payload"]
    job_salt = hashlib.sha256(salt + want.name.encode()).digest()[:16]  # no two jobs share one
    return {"tool": TOOL, "secrets_digest": digest(payload, job_salt) if has_secrets(kind, payload) else None}


def _payload_change(want: Desired, have: Mapping[str, Any]) -> str | None:
    kind, payload = want.fields["kind"], want.fields["payload"]
    if redact_payload(kind, payload) != have["payload"]:
        return "payload"
    if has_secrets(kind, payload):
        marker = have.get("managed_by") or {}
        if not digest_matches(payload, marker.get("secrets_digest")):
            return "payload (secrets)"
    return None


def _update(want: Desired, have: Mapping[str, Any], salt: bytes) -> Action | None:
    skip = ("status", "payload", "managed_by")
    changed = [f for f, v in want.fields.items() if f not in skip and v != have.get(f)]
    if (payload := _payload_change(want, have)) is not None:
        changed.append(payload)
    if not _managed(have):
        changed.append("managed_by")  # adopted: from now on the file owns it (and --prune may delete it)
    if not changed:
        return None
    body = {f: want.fields[f] for f in changed if f in want.fields}
    if payload is not None or "kind" in changed:  # a payload is checked against the kind: both or neither
        body.update(kind=want.fields["kind"], payload=want.fields["payload"])
    if payload is not None or "managed_by" in changed:
        body["managed_by"] = _marker(want, salt)
    return Action(Step.UPDATE, want.name, int(have["id"]), tuple(changed), body, want.source)


def strays(desired: Sequence[Desired], current: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Jobs apply made that no file names any more."""
    names = {want.name for want in desired}
    return [have for have in current if _managed(have) and have["name"] not in names]


def plan(desired: Sequence[Desired], current: Sequence[Mapping[str, Any]], *, prune: bool, salt: bytes) -> list[Action]:
    """The actions, in file order, then deletions (only with `prune`, only of jobs apply made)."""
    by_name = {job["name"]: job for job in current}
    actions: list[Action] = []
    for want in desired:
        have = by_name.get(want.name)
        if have is None:
            body = {**want.fields, "managed_by": _marker(want, salt)}
            actions.append(Action(Step.CREATE, want.name, body=body, source=want.source))
            continue
        update = _update(want, have, salt)
        if update is not None:
            actions.append(update)
        if want.fields["status"] != have["status"]:
            step = Step.PAUSE if want.fields["status"] == "paused" else Step.RESUME
            actions.append(Action(step, want.name, int(have["id"]), source=want.source))
        elif update is None:
            actions.append(Action(Step.UNCHANGED, want.name, int(have["id"]), source=want.source))
    if prune:
        actions += [Action(Step.DELETE, job["name"], int(job["id"])) for job in strays(desired, current)]
    return actions


def describe(action: Action) -> str:
    """One line of the printed plan: `update  nightly: cron_expression, payload (secrets)`."""
    detail = f": {', '.join(action.changed)}" if action.changed else ""
    if action.step is Step.CREATE and action.body is not None and action.body.get("status") == "paused":
        detail = " (paused)"
    return f"{action.step.value:<9}  {action.name}{detail}"


def summary(actions: Sequence[Action]) -> str:
    counts = {step: sum(1 for a in actions if a.step is step) for step in Step}
    if all(counts[step] == 0 for step in Step if step is not Step.UNCHANGED):
        return f"Nothing to change: {counts[Step.UNCHANGED]} job(s) match the file(s)."
    return ", ".join(f"{n} to {step.value}" if step is not Step.UNCHANGED else f"{n} unchanged"
                     for step, n in counts.items() if n)  # fmt: skip
