"""Labels and label selectors (issue 25, item 4). Pure.

A job's `labels` are a key=value map with Kubernetes' limits: a key is an optional DNS-subdomain
prefix and a slash, then a name of at most 63 characters (alphanumerics, `-`, `_`, `.`, starting
and ending alphanumeric); a value is empty or such a name. At most MAX_LABELS labels a job.

A selector is a comma-separated list of requirements, all of which must hold (Kubernetes' grammar):

- `key=value` (also `key==value`): the label is set to that value;
- `key!=value`: the label is not set to that value (a job without the label matches);
- `key in (a,b)`, `key notin (a,b)`: the value is one of them / the label is absent or none of them;
- `key`: the label is set (any value); `!key`: it is not set.

`parse` checks a selector (InvalidInput naming the field and the requirement), `matches` decides
it for one job's labels, and `jsonpath` turns it into one SQL/JSON path predicate the store runs
against the GIN index on `jobs.labels`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from cronos.errors import InvalidInput

MAX_LABELS = 64
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?"  # a DNS subdomain's characters, 253 at most
_KEY = rf"(?:{_PREFIX}/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(_VALUE)
# The grammar below as one regular expression, for the API's schema (what a client may send).
_REQ = (
    rf"\s*(?:!?\s*{_KEY}|{_KEY}\s*(?:==?|!=)\s*{_VALUE}"
    rf"|{_KEY}\s+(?:in|notin)\s*\(\s*{_NAME}(?:\s*,\s*{_NAME})*\s*\))\s*"
)
KEY_PATTERN = f"^{_KEY}$"
VALUE_PATTERN = f"^{_VALUE}$"
SELECTOR_PATTERN = f"^{_REQ}(?:,{_REQ})*$"
_SET_RE = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\(([^()]*)\)\s*$")

Op = Literal["=", "!=", "in", "notin", "exists", "!exists"]


class Requirement(msgspec.Struct, frozen=True):
    key: str
    op: Op
    values: tuple[str, ...] = ()


def key_refusal(key: str) -> str | None:
    """Why `key` is not a label key (None: it is one)."""
    if not _KEY_RE.fullmatch(key):
        return (
            "is not a label key: [prefix/]name, a name of 1-63 letters, digits, '-', '_', '.' "
            "(alphanumeric at each end), a prefix of 1-253 lower-case letters, digits, '-', '.'"
        )
    return None


def prometheus_label(key: str) -> str:
    """The Prometheus label a label key is exported as on per-job metrics: `label_` + the key with
    each character a Prometheus name may not have (`/`, `.`, `-`) as `_`."""
    return "label_" + re.sub(r"[^A-Za-z0-9_]", "_", key)


def value_refusal(value: str) -> str | None:
    """Why `value` is not a label value (None: it is one)."""
    if not _VALUE_RE.fullmatch(value):
        return "is not a label value: empty, or 1-63 letters, digits, '-', '_', '.' (alphanumeric at each end)"
    return None


def check_labels(labels: Mapping[str, Any], field: str = "$.labels") -> dict[str, str]:
    """The labels, checked: InvalidInput naming the label (`$.labels.team`) that does not fit."""
    if len(labels) > MAX_LABELS:
        raise InvalidInput(field, f"at most {MAX_LABELS} labels")
    for key, value in labels.items():
        why = key_refusal(key)
        if why is not None:
            raise InvalidInput(f"{field}.{key}", f"{key!r} {why}")
        if not isinstance(value, str):
            raise InvalidInput(f"{field}.{key}", "a label's value is a string")
        why = value_refusal(value)
        if why is not None:
            raise InvalidInput(f"{field}.{key}", f"{value!r} {why}")
    return dict(labels)


def _split(text: str) -> list[str]:
    """The requirements: commas outside parentheses separate them."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def parse(text: str, field: str = "selector") -> tuple[Requirement, ...]:
    """A selector's requirements; InvalidInput naming `field` and the requirement that does not parse."""
    if not text.strip():
        raise InvalidInput(field, "an empty selector: name at least one requirement (team=data)")
    out = []
    for part in _split(text):
        out.append(_requirement(part, field))
    return tuple(out)


def _requirement(part: str, field: str) -> Requirement:
    raw = part.strip()
    found = _SET_RE.match(raw)
    if found:
        key, op, inner = found.group(1), found.group(2), found.group(3)
        values = tuple(v.strip() for v in inner.split(","))
        req = Requirement(key, "in" if op == "in" else "notin", values)
    elif "!=" in raw:
        key, _, value = raw.partition("!=")
        req = Requirement(key.strip(), "!=", (value.strip(),))
    elif "=" in raw:
        key, _, value = raw.partition("==" if "==" in raw else "=")
        req = Requirement(key.strip(), "=", (value.strip(),))
    elif raw.startswith("!"):
        req = Requirement(raw[1:].strip(), "!exists")
    else:
        req = Requirement(raw, "exists")
    why = key_refusal(req.key) or next((value_refusal(v) for v in req.values if value_refusal(v)), None)
    if why is not None or (req.op in ("in", "notin") and not all(req.values)):
        raise InvalidInput(field, f"{raw!r} is not a requirement (key=value, key!=value, key in (a,b), key, !key)")
    return req


def matches(requirements: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    """Whether a job with these labels is selected."""
    return all(_holds(req, labels) for req in requirements)


def _holds(req: Requirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    if req.op in ("=", "in"):
        return value is not None and value in req.values
    if req.op in ("!=", "notin"):
        return value is None or value not in req.values
    if req.op == "exists":
        return value is not None
    return value is None


def jsonpath(requirements: tuple[Requirement, ...]) -> str:
    """The selector as one SQL/JSON path predicate over a job's labels (`labels @@ path`), which the
    GIN index on `jobs.labels` serves: PostgreSQL extracts index keys from its positive tests
    (`=`, `in`, existence); negations filter what those find. Keys and values are quoted as they
    are (their characters need no escape: key_refusal, value_refusal)."""
    return " && ".join(_path(req) for req in requirements)


def _path(req: Requirement) -> str:
    at = f'$."{req.key}"'
    if req.op in ("=", "in", "!=", "notin"):
        test = " || ".join(f'{at} == "{v}"' for v in req.values)
        return f"({test})" if req.op in ("=", "in") else f"!({test})"
    return f"exists({at})" if req.op == "exists" else f"!exists({at})"
