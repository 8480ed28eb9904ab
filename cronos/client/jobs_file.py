"""Jobs files: YAML (or JSON) text to the validated jobs `cronos apply` makes the cluster match.

Pure: no I/O. A file is checked against the jobs-file schema the API publishes
(GET /api/jobs-file.schema.json), then each job gets the checks the API makes that a schema
cannot (its schedule, its payload for its kind). `${CRONOS_APPLY_NAME}` in a string is an
environment variable (passed in), so secrets stay out of files; only variables named with that
prefix, and only where the API keeps the value secret (shown as `***`): a file, perhaps from
someone else, cannot copy the runner's other variables (its API token, a database URL) into a
job anyone with a read token sees. YAML aliases are bounded (`MAX_NODES`): a few hundred bytes of
nested aliases would otherwise expand to gigabytes. Every refusal is one line naming the file,
the job and the field, and never quotes a value: it may be a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import msgspec
import yaml

from cronos import namespaces, selectors
from cronos.errors import CronosError, InvalidInput
from cronos.hashed import hashed
from cronos.interval import canonical
from cronos.payloads import PATTERN_MEANINGS, PAYLOAD_TYPES, check_payload, explain
from cronos.redact import redact_payload
from cronos.schedule import parse_schedule
from cronos.schedule_union import as_entries, check_entries

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
ENV_PREFIX = "CRONOS_APPLY_"  # the only variables a file may read
_MARK = "CRONOSAPPLYVARIABLE"  # stands for every variable's value while checking it stays hidden
NOT_SECRET = (
    "a ${VAR} only where the API keeps the value secret (shown as ***): a sensitive header, env "
    "variable or payload key (token, secret, key, password, auth...)"
)
MAX_NODES = 100_000  # a YAML document's values with every alias expanded; a big jobs file has a few thousand


class ApplyInvalid(CronosError):
    """A jobs file that cannot be applied; the message names the file, the job and the field."""


@dataclass(frozen=True, slots=True)
class Desired:
    source: str  # the file it came from
    fields: dict[str, Any]  # every field of a job create body, defaults filled in

    @property
    def name(self) -> str:
        return str(self.fields["name"])


class _BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a document whose aliases expand past MAX_NODES values: the
    loaded object shares an aliased value, but the JSON it becomes (and each check) repeats it."""

    def compose_document(self) -> yaml.Node | None:
        node: yaml.Node | None = super().compose_document()
        if node is not None and expanded_size(node) > MAX_NODES:
            raise ApplyInvalid(f"YAML aliases expand to more than {MAX_NODES} values: write the values out")
        return node


def expanded_size(root: yaml.Node) -> int:
    """How many values `root` holds with every alias expanded (each shared node counted each time
    it is used), stopping past MAX_NODES; a node that holds itself counts as too many."""
    sizes: dict[int, int] = {}
    opened: set[int] = set()

    def size(node: yaml.Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in opened:  # an alias inside its own anchor: endless
            return MAX_NODES + 1
        opened.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > MAX_NODES:
                break
        sizes[id(node)] = total
        return total

    return size(root)


def parse(source: str, text: str) -> Any:
    """YAML (JSON is YAML) as the JSON the API will see: dates become text, keys strings."""
    try:
        loaded = yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader, bounded
    except ApplyInvalid as exc:
        raise ApplyInvalid(f"{source}: {exc}") from None
    except RecursionError:
        raise ApplyInvalid(f"{source}: YAML nested too deeply") from None
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


Lookup = Callable[[str, str], str]  # a variable's name and where it is -> its value


def _expand(value: Any, lookup: Lookup, path: str) -> Any:
    """`${NAME}` in string values becomes lookup's value (`$$` is a `$`)."""
    if isinstance(value, dict):
        return {k: _expand(v, lookup, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, lookup, f"{path}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "$" not in value:
        return value
    return _VAR.sub(lambda match: "$" if match[1] is None else lookup(match[1], path), value)


def _shown_at(value: Any, path: str) -> str | None:
    """The path of the first string that still holds _MARK, or None."""
    if isinstance(value, dict):
        found = (_shown_at(v, f"{path}.{k}") for k, v in value.items())
    elif isinstance(value, list):
        found = (_shown_at(v, f"{path}[{i}]") for i, v in enumerate(value))
    else:
        return path if isinstance(value, str) and _MARK in value else None
    return next((where for where in found if where is not None), None)


def expand_variables(job: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The job with its `${CRONOS_APPLY_*}` variables expanded. InvalidInput naming the field for
    another variable, an unset one, or one where the API would show its value (expanded with a
    marker, redacted as the API redacts, then looked for)."""

    def value(name: str, path: str) -> str:
        if not name.startswith(ENV_PREFIX):
            raise InvalidInput(path, f"${{{name}}}: apply reads only variables named {ENV_PREFIX}* (rename it)")
        if name not in environ:
            raise InvalidInput(path, f"${{{name}}} is not set in the environment")
        return environ[name]

    expanded = {k: _expand(v, value, f"$.{k}") for k, v in job.items()}
    marked = {k: _expand(v, lambda _name, _path: _MARK, f"$.{k}") for k, v in job.items()}
    payload = marked.get("payload")
    if isinstance(payload, dict):
        marked["payload"] = redact_payload(str(marked.get("kind", "task")), payload)
    if (where := _shown_at(marked, "$")) is not None:
        raise InvalidInput(where, NOT_SECRET)
    return expanded


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
    if fields.get("spread") is not None:  # as the API stores it, so `600` matches a stored `10m`
        fields["spread"] = canonical(fields["spread"], "$.spread")
    if fields.get("cron_expression") is not None:
        parse_schedule(hashed(fields["cron_expression"], str(fields.get("name") or "")), fields["timezone"])
    if fields.get("schedules"):  # checked, intervals spelled as the API stores them
        entries = check_entries(as_entries(fields["schedules"]), fields["timezone"], str(fields.get("name") or ""),
                                parse_schedule)  # fmt: skip
        fields["schedules"] = msgspec.to_builtins(entries)
    selectors.check_labels(fields.get("labels") or {})
    try:
        check_payload(fields["kind"], msgspec.convert(fields["payload"], PAYLOAD_TYPES[fields["kind"]]))
    except msgspec.ValidationError as exc:
        raise InvalidInput("$.payload", explain(str(exc))) from None


def file_namespace(documents: Sequence[tuple[str, Any]], given: str) -> str:
    """The namespace an apply acts in: the one its files name (`namespace:`), else `given` (--namespace,
    $CRONOS_NAMESPACE, else default). Files naming two, or one other than a namespace given
    explicitly, are refused: one apply acts in one namespace, and --prune deletes only there."""
    named = {doc["namespace"]: source for source, doc in documents if isinstance(doc, dict) and "namespace" in doc}
    if len(named) > 1:
        (a, first), (b, second) = sorted(named.items())[:2]
        raise ApplyInvalid(f"{first} names namespace {a!r} and {second} {b!r}: one apply acts in one namespace")
    if not named:
        return given
    ((name, source),) = named.items()
    if not isinstance(name, str) or re.fullmatch(namespaces.PATTERN, name) is None:
        raise ApplyInvalid(f"{source}: namespace: {str(name)[:80]!r} is not a namespace name")
    if given not in (namespaces.DEFAULT, name):
        raise ApplyInvalid(f"{source} names namespace {name!r}, but --namespace or CRONOS_NAMESPACE gives {given!r}")
    return name


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
                expanded = expand_variables(job, environ)
                fields = {name: expanded.get(name, spec.get("default")) for name, spec in properties.items()}
                _check(fields)
            except InvalidInput as exc:
                raise ApplyInvalid(f"{where}: {exc}") from None
            if (other := seen.get(fields["name"])) is not None:
                raise ApplyInvalid(f"{where}: the name is also used in {other}; a name is a job's identity")
            seen[fields["name"]] = source
            found.append(Desired(source, fields))
    return found
