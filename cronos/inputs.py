"""Run now with inputs (issue 24, item 5): a manual run's payload overrides and logical date. Pure.

Overrides are a JSON Merge Patch (RFC 7396) of the job's payload: objects merge key by key (an
http job's header names case-insensitively), any other value (arrays included) replaces, and
`null` removes a key. They are checked here against the job's secrets (cronos.redact): a place
that holds a secret, or would hold one, cannot be overridden (secrets are set on the job, and
stay write-only), and while the job holds secrets its target cannot change (the secrets never
follow a job elsewhere, as in a PATCH). So the overrides a run stores never hold a secret. What
decides where an http job's secrets go is the job's alone: inputs never set or remove its Host
header or its redirect policy (cronos.secret_bounds).

A re-run of a past tick (`scheduled_for`) takes the next free attempt of that tick, once every
run of it has ended (the retries of an unfinished one would need those attempts), and only at an
instant the ledger holds a run for or the job's schedule fired at, as of that time.

Which runs have inputs: the executor looks them up for the runs whose trigger is in
INPUT_TRIGGERS only (a manual run, a retry), never for scheduled or chain runs; the inputs of an
attempt are those of the newest manual run of its tick at or before it (its retries keep them;
a later re-run without overrides writes an empty row, which ends them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from cronos.errors import Conflict, InvalidInput
from cronos.redact import http_move, redact_payload, same_target, task_targets
from cronos.secret_bounds import ROUTING_HEADERS, host_header
from cronos.ticks import Segment, plan

INPUT_TRIGGERS = frozenset({"manual", "retry"})

SECRET_OVERRIDDEN = "holds a secret of the job: secrets cannot be overridden in a run's inputs (PATCH the job)"
SECRET_ADDED = (
    "would hold a secret (a sensitive name, credentials in a URL, a value with its own scheme): "
    "secrets are set on the job (PATCH), never in a run's inputs"
)
# Executors are chosen by a task's action (each announces the actions it serves): a run of another
# action is a run of another job.
ACTION_CHANGED = "a run's inputs may not change a task job's action: trigger a job with that action instead"
TARGET_CHANGED = (
    "the job holds secrets, which never go to another target: a run's inputs may not change an http job's "
    "scheme, host, port, path or method, nor a task payload's action, URLs, methods, hosts or ports"
)
JOBS_OWN = (
    "decides where the job's secrets go: a run's inputs may not set or remove an http job's Host header, "
    "follow_redirects or secrets_follow_redirects (PATCH the job)"
)
# Top-level http fields only the job sets (the Host header: _check_jobs_own).
_JOBS_OWN_FIELDS = frozenset({"follow_redirects", "secrets_follow_redirects"})
NOT_A_TICK = "is not a tick of the job's schedule as of that time, nor of any run of it (GET /api/jobs/{id}/ticks)"
BEFORE_CREATED = "is before the job existed: only its own ticks are re-run"
IN_FUTURE = "must be a past tick: a run now needs no scheduled_for"

Path = tuple[str | int, ...]
_US = timedelta(microseconds=1)


def merge_patch(target: Any, patch: Any, *, fold: bool = False) -> Any:
    """RFC 7396: `patch` applied to `target`; `fold`: the keys of this object match case-insensitively."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if fold:
            for old in [k for k in out if isinstance(k, str) and k.lower() == str(key).lower() and k != key]:
                out[key] = out.pop(old)  # the patch's spelling of the name
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def merged_payload(kind: str, payload: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The payload a run executes: the job's with its overrides applied (no check)."""
    out = merge_patch(payload, {k: v for k, v in overrides.items() if not (kind == "http" and k == "headers")})
    if kind == "http" and "headers" in overrides:
        headers = merge_patch(payload.get("headers"), overrides["headers"], fold=True)
        if headers is None:
            out.pop("headers", None)
        else:
            out["headers"] = headers
    result: dict[str, Any] = out
    return result


def as_applied(patch: Mapping[str, Any], merged: Mapping[str, Any]) -> dict[str, Any]:
    """`patch` with each value it sets read back from `merged`, once the API's checks ran on it (they
    make an integral float an int where the kind wants one, as for a job's own payload)."""
    out: dict[str, Any] = {}
    for key, value in patch.items():
        if value is None or key not in merged:
            out[key] = value
        elif isinstance(value, dict) and isinstance(merged[key], dict):
            out[key] = as_applied(value, merged[key])
        else:
            out[key] = merged[key]
    return out


def field(path: Path) -> str:
    return "$.payload" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _touched(patch: Any, path: Path = ()) -> list[Path]:
    """The places a merge patch sets or removes (objects are merged into, so their members)."""
    if not isinstance(patch, dict) or (not patch and path):
        return [path]
    return [place for key, value in patch.items() for place in _touched(value, (*path, str(key)))]


def _differ(shown: Any, real: Any, path: Path, out: list[Path]) -> None:
    if shown == real:
        return
    if isinstance(shown, dict) and isinstance(real, dict):
        for key in real:
            _differ(shown.get(key), real[key], (*path, str(key)), out)
    elif isinstance(shown, list) and isinstance(real, list) and len(shown) == len(real):
        for index, (a, b) in enumerate(zip(shown, real, strict=True)):
            _differ(a, b, (*path, index), out)
    else:
        out.append(path)


def secret_places(kind: str, payload: Mapping[str, Any]) -> list[Path]:
    """Where redact_payload hides something in `payload`: exactly what the API never shows."""
    out: list[Path] = []
    _differ(redact_payload(kind, dict(payload)), dict(payload), (), out)
    return out


def _related(a: Path, b: Path) -> bool:
    """One place holds the other (or they are the same)."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _folded(kind: str, path: Path) -> Path:
    """Header names compare case-insensitively."""
    if kind == "http" and len(path) >= 2 and path[0] == "headers":
        return (path[0], str(path[1]).lower(), *path[2:])
    return path


def check_overrides(kind: str, payload: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The merged payload, once `overrides` touch no secret of the job, add none, and (while the job
    holds secrets) keep its target; raises InvalidInput naming the place. The merged payload is then
    validated as the job's kind requires (the API's check_payload)."""
    merged = merged_payload(kind, payload, overrides)
    touched = _touched(dict(overrides))
    if kind == "http":
        _check_jobs_own(touched, payload, merged)
    before = [_folded(kind, p) for p in secret_places(kind, payload)]
    after = [_folded(kind, p) for p in secret_places(kind, merged)]
    for place in touched:
        if any(_related(_folded(kind, place), s) for s in before):
            raise InvalidInput(field(place), SECRET_OVERRIDDEN)
        if any(_related(_folded(kind, place), s) for s in after):
            raise InvalidInput(field(place), SECRET_ADDED)
    if kind == "task" and merged.get("action") != payload.get("action"):
        raise InvalidInput("$.payload.action", ACTION_CHANGED)
    if before and not same_target(kind, merged, payload):
        raise InvalidInput(_target_field(kind, touched, merged, payload), TARGET_CHANGED)
    return merged


def _check_jobs_own(touched: Sequence[Path], payload: Mapping[str, Any], merged: Mapping[str, Any]) -> None:
    """Refuse inputs that set the redirect policy or set, change or remove a header that picks the
    virtual host (Host, X-Forwarded-Host...: cronos.secret_bounds.ROUTING_HEADERS)."""
    moves_host = host_header(payload.get("headers")) != host_header(merged.get("headers"))
    for place in touched:
        folded = _folded("http", place)
        routing = folded[:1] == ("headers",) and len(folded) > 1 and folded[1] in ROUTING_HEADERS
        if (folded[:1] and folded[0] in _JOBS_OWN_FIELDS) or routing:
            raise InvalidInput(field(place), JOBS_OWN)
        if moves_host and any(_related(folded, ("headers", name)) for name in ROUTING_HEADERS):
            raise InvalidInput(field(place), JOBS_OWN)


def _target_field(kind: str, touched: Sequence[Path], new: Mapping[str, Any], old: Mapping[str, Any]) -> str:
    """The overridden place that moved the target (for the 422's field)."""
    if kind == "http":
        return http_move(new, old) or "$.payload"
    if kind == "task":
        a, b = task_targets(new), task_targets(old)
        moved = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        for place in touched:
            text = "$" + field(place).removeprefix("$.payload")
            if any(m == text or m.startswith((text + ".", text + "[")) or text.startswith(m) for m in moved):
                return field(place)
    return field(touched[0]) if touched else "$.payload"


# --- the logical date of a re-run ---------------------------------------------------------


def tick_refusal(segs: Sequence[Segment], tick: datetime, now: datetime) -> str | None:
    """Why `tick` is not a past tick of the job's schedule as of that time (None: it is). The
    segments are cronos.ticks.segments of the job's history around `tick`; a tick while the job was
    paused is one (a backfill), one before the job existed is not."""
    if tick > now:
        return IN_FUTURE
    found = plan(segs, tick - _US, tick, 1)
    if not found or found[0][0] != tick:
        return NOT_A_TICK
    return planned_refusal(found[0][1])


def planned_refusal(seg: Segment) -> str | None:
    """Why a tick the schedule planned in `seg` is not one of the job's own (None: it is); a
    backfill (cronos.backfill) asks this of every tick it plans."""
    if seg.status == "absent":
        return BEFORE_CREATED
    return None


def rerun_attempt(job_id: int, tick: datetime, last: int | None, unfinished: Sequence[int], refusal: str | None) -> int:
    """The attempt a re-run of `tick` takes: the next free one, once every run of the tick ended.
    `last` is the tick's highest attempt in the ledger (None: no run), `unfinished` its runs not
    ended, `refusal` tick_refusal's answer (a tick the ledger holds needs none)."""
    if unfinished:
        ids = ", ".join(str(i) for i in sorted(unfinished))
        raise Conflict(
            f"job {job_id}'s tick {tick.isoformat()} has a run that has not ended (run {ids}): "
            "re-run it once it ends (its retries take the next attempts)"
        )
    if last is None and refusal is not None:
        raise InvalidInput("$.scheduled_for", refusal)
    return (last or 0) + 1
