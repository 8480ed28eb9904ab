"""Jobs files: YAML (or JSON) text to the validated jobs `cronos apply` makes the cluster match.

Pure: no I/O. A file is checked against the jobs-file schema the API publishes
(GET /api/jobs-file.schema.json), then each job gets the checks the API makes that a schema
cannot (its schedule, its payload for its kind). `${NAME}` in a string is an environment
variable (passed in), so secrets stay out of files. Every refusal is one line naming the file,
the job and the field, and never quotes a value: it may be a secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import msgspec
import yaml

from cronos.errors import CronosError, InvalidInput
from cronos.interval import canonical
from cronos.payloads import PATTERN_MEANINGS, PAYLOAD_TYPES, check_payload, explain
from cronos.schedule import parse_schedule

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ApplyInvalid(CronosError):
    """A jobs file that cannot be applied; the message names the file, the job and the field."""


@dataclass(frozen=True, slots=True)
class Desired:
    source: str  # the file it came from
    fields: dict[str, Any]  # every field of a job create body, defaults filled in

    @property
    def name(self) -> str:
        return str(self.fields["name"])


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


def _check(fields: dict[str, Any]) -> None:
    """The API's checks a schema cannot make: the schedule (an interval spelled as the API stores
    it, so `90m` matches a stored `1h30m`), and the payload for its kind."""
    given = [name for name in ("cron_expression", "run_at", "every") if fields.get(name) is not None]
    if len(given) != 1:
        raise InvalidInput(
            f"$.{'every' if 'every' in given else 'cron_expression'}",
            "give exactly one of cron_expression, every (an interval) and run_at (a one-off)",
        )
    if fields.get("anchor") is not None and fields.get("every") is None:
        raise InvalidInput("$.anchor", "only an interval (every) has an anchor")
    if fields.get("every") is not None:
        fields["every"] = canonical(fields["every"])
    if fields.get("cron_expression") is not None:
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
