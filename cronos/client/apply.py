"""Jobs as code: what `cronos apply` must do to make the cluster's jobs match the jobs files.

Pure: no I/O. The files' jobs (cronos.client.jobs_file) and the API's current jobs become a plan of
actions; cronos.client.apply_cli reads, calls and prints.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from cronos import selectors
from cronos.client.jobs_file import Desired
from cronos.models import TERMINAL_STATUSES, Chain
from cronos.redact import redact_payload
from cronos.schedule_union import as_entries

TOOL = "cronos-apply"  # managed_by.tool of the jobs apply writes; --prune deletes only these
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1  # ~16 MiB, tens of ms: costly to guess a weak secret


class Step(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    PAUSE = "pause"
    RESUME = "resume"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Action:
    step: Step
    name: str
    job_id: int | None = None
    changed: tuple[str, ...] = ()  # what an update changes
    body: dict[str, Any] | None = field(default=None, repr=False)  # of the POST or PATCH (secrets too)
    source: str = ""


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


_INSTANTS = ("run_at", "start_at", "end_at", "anchor")


def _chain(value: Any) -> Chain | None:
    """A chain as the API holds it, its defaults filled (a file may leave them out)."""
    return None if value is None else msgspec.convert(value, Chain, strict=False)


def _equal(field: str, want: Any, have: Any) -> bool:
    """The same value; instants the same instant however their offset is written; a chain the
    same chain whichever of its defaults are written."""
    if field == "chain":
        try:
            return _chain(want) == _chain(have)
        except msgspec.ValidationError:
            return False  # the API says why
    if field == "schedules" and isinstance(want, list) and isinstance(have, list):
        try:  # entries alike however their anchors' offsets are written
            return as_entries(want) == as_entries(have)
        except msgspec.ValidationError:
            return False  # the API says why
    if field in _INSTANTS and isinstance(want, str) and isinstance(have, str):
        try:
            return datetime.fromisoformat(want) == datetime.fromisoformat(have)
        except ValueError:
            return False  # not an instant: the API says why
    return bool(want == have)


def _update(want: Desired, have: Mapping[str, Any], salt: bytes) -> Action | None:
    skip = ("status", "payload", "managed_by")
    changed = [f for f, v in want.fields.items() if f not in skip and not _equal(f, v, have.get(f))]
    if (payload := _payload_change(want, have)) is not None:
        changed.append(payload)
    if not _managed(have):
        changed.append("managed_by")  # adopted: from now on the file owns it (and --prune may delete it)
    if not changed:
        return None
    body = {f: want.fields[f] for f in changed if f in want.fields}
    if have["status"] in TERMINAL_STATUSES and want.fields["status"] == "active":
        body["status"] = "active"  # a changed window (max_runs, run_at) may give an ended job ticks again
    if payload is not None or "kind" in changed:  # a payload is checked against the kind: both or neither
        body.update(kind=want.fields["kind"], payload=want.fields["payload"])
    if payload is not None or "managed_by" in changed:
        body["managed_by"] = _marker(want, salt)
    return Action(Step.UPDATE, want.name, int(have["id"]), tuple(changed), body, want.source)


def strays(desired: Sequence[Desired], current: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Jobs apply made that no file names any more, each after the strays that name it as a parent
    (the API refuses to delete a parent while a child names it)."""
    names = {want.name for want in desired}
    left = [have for have in current if _managed(have) and have["name"] not in names]
    ordered: list[Mapping[str, Any]] = []
    while left:  # parents make no cycle: each round takes at least one job
        named = {p for have in left for p in have.get("parents", ())}
        ready = [have for have in left if have["id"] not in named] or left
        ordered += ready
        left = [have for have in left if all(have is not r for r in ready)]
    return ordered


def scoped(
    requirements: tuple[selectors.Requirement, ...], desired: Sequence[Desired], current: Sequence[Mapping[str, Any]]
) -> tuple[list[Desired], list[Mapping[str, Any]]]:
    """An apply limited to a selector: the files' jobs it selects, and the cluster's jobs it selects
    (so --prune deletes only those) plus the ones the files name (found by name, not created twice)."""
    wanted = [want for want in desired if selectors.matches(requirements, want.fields.get("labels") or {})]
    names = {want.name for want in wanted}
    kept = [
        have for have in current if have["name"] in names or selectors.matches(requirements, have.get("labels") or {})
    ]
    return wanted, kept


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
        # A job that ended (completed, expired) stays so: its window, max_runs or run_at revive it.
        if want.fields["status"] != have["status"] and have["status"] not in TERMINAL_STATUSES:
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
