"""Several schedules per job (issue 40 item 1): a job fires at the union of its own schedule
(`cron_expression` or `every`) and each entry of its `schedules`. Pure: no clock, no I/O.

An entry is a cron expression (in its own zone, default the job's) or an interval (from its own
anchor, default the epoch). The union is one NextAfter (`Union`): every caller that asks a job's
schedule for its next fire time (the leader, the preview, tick accounting, backfill, the
hand-over of an edit) gets it through `cronos.schedule_window.job_schedule` and never sees the
entries. An instant that two entries produce is one fire time, so its tick runs once. Calendars
and blackouts (cronos.rules) filter the union as they filter a single schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Protocol

import msgspec

from cronos.dst import fire_times
from cronos.errors import InvalidInput, InvalidSchedule
from cronos.hashed import has_hash, hashed
from cronos.interval import canonical, interval_of

MAX_ENTRIES = 20
FIELD = "$.schedules"


def _text(max_length: int, description: str, fmt: str, min_length: int | None = 1) -> msgspec.Meta:
    """An entry's text field: its bounds, and the format named for tools (the checks are check_entries')."""
    return msgspec.Meta(
        min_length=min_length, max_length=max_length, description=description, extra_json_schema={"format": fmt}
    )


class ScheduleEntry(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One more schedule of a job: `cron` (in `timezone`, default the job's) or `every` (from `anchor`)."""

    cron: Annotated[str, _text(200, "a cron expression (as cron_expression)", "cron")] | None = None
    every: Annotated[str, _text(40, "an interval (as every): 90m, 1h30m", "cronos-duration")] | None = None
    # No minimum length: a stored entry is read with these bounds, and one API version stored "" (now refused).
    timezone: (
        Annotated[str, _text(64, "the cron entry's IANA zone; null: the job's", "iana-time-zone", min_length=None)]
        | None
    ) = None
    anchor: Annotated[datetime, msgspec.Meta(tz=True, description="the interval's anchor; null: the epoch")] | None = (
        None
    )


class NextAfter(Protocol):
    def next_after(self, after: datetime) -> datetime: ...


@dataclass(frozen=True, slots=True)
class Union:
    """The fire times of any of `parts`, each once."""

    parts: tuple[NextAfter, ...]

    def next_after(self, after: datetime) -> datetime:
        found: datetime | None = None
        for part in self.parts:
            try:
                t = part.next_after(after)
            except OverflowError:  # this part's calendar ended: the others go on
                continue
            if found is None or t < found:
                found = t
        if found is None:
            raise OverflowError(f"no fire time after {after.isoformat()} before the year 10000")
        return found

    def fire_times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
        """Fire instants ``t`` with ``after < t <= until``, ascending, at most ``limit``."""
        return fire_times(self.next_after, after, until, limit)


Parse = Callable[[str, str], tuple[Any, str | None]]


def entry_schedule(entry: ScheduleEntry, job_zone: str, key: str, parse: Parse) -> NextAfter:
    """The schedule of one entry; InvalidSchedule as `parse` raises it."""
    if entry.every is not None:
        return interval_of(entry.every, entry.anchor)
    assert entry.cron is not None, "an entry has cron or every (check_entries)"
    schedule: NextAfter = parse(hashed(entry.cron, key), entry.timezone or job_zone)[0]
    return schedule


def union_of(base: NextAfter, entries: Sequence[ScheduleEntry], job_zone: str, key: str, parse: Parse) -> NextAfter:
    """`base` and the entries as one schedule (`base` itself without entries: the common case)."""
    if not entries:
        return base
    return Union((base, *(entry_schedule(e, job_zone, key, parse) for e in entries)))


def any_hash(cron_expression: str | None, entries: Sequence[ScheduleEntry]) -> bool:
    """The job's name picks values of its schedule: its expression or an entry's has an `H` (cronos.hashed)."""
    return any(has_hash(text) for text in (cron_expression, *(e.cron for e in entries)) if text is not None)


def as_entries(value: Any) -> tuple[ScheduleEntry, ...]:
    """Entries as a row or a revision holds them (JSON), as the Structs the schedule reads."""
    if not value:
        return ()
    return tuple(msgspec.convert(value, list[ScheduleEntry], strict=False))


def check_entries(
    entries: Sequence[ScheduleEntry], job_zone: str, key: str, parse: Callable[[str, str], object]
) -> list[ScheduleEntry]:
    """The entries as they are stored (intervals spelled canonically, an empty zone null), or InvalidInput naming the
    entry's field: each is a cron expression or an interval, a zone only with a cron expression, an
    anchor only with an interval."""
    if len(entries) > MAX_ENTRIES:
        raise InvalidInput(FIELD, f"at most {MAX_ENTRIES} entries")
    out = []
    for index, entry in enumerate(entries):
        at = f"{FIELD}[{index}]"
        if (entry.cron is None) == (entry.every is None):
            raise InvalidInput(at, "give exactly one of cron (an expression) and every (an interval)")
        if entry.timezone == "":  # the job's zone, as null says: stored as null (the text form reads no `TZ=`)
            entry = msgspec.structs.replace(entry, timezone=None)
        if entry.timezone is not None and entry.cron is None:
            raise InvalidInput(f"{at}.timezone", "only a cron entry has a time zone (an interval is elapsed time)")
        if entry.anchor is not None and entry.every is None:
            raise InvalidInput(f"{at}.anchor", "only an interval (every) has an anchor")
        if entry.every is not None:
            out.append(msgspec.structs.replace(entry, every=canonical(entry.every, f"{at}.every")))
            continue
        assert entry.cron is not None
        for name, text in (("cron", entry.cron), ("timezone", entry.timezone or "")):
            if "\x00" in text:
                raise InvalidInput(f"{at}.{name}", "must not contain NUL characters")
        try:
            parse(hashed(entry.cron, key), entry.timezone or job_zone)
        except InvalidSchedule as exc:  # it names the single schedule's field: name the entry's
            name = "timezone" if exc.field.endswith("timezone") else "cron"
            raise InvalidSchedule(f"{at}.{name}", exc.message) from None
        out.append(entry)
    return out  # an entry given twice changes nothing: the union has each instant once


def parse_text(text: str, field: str = FIELD) -> list[ScheduleEntry]:
    """Entries as a command line writes them, `;`-separated: a cron expression (`TZ=Zone ` before it
    for a zone of its own) or `every DURATION` (` from ISO` after it for an anchor):
    `0 8 * * 1-5; TZ=Europe/Paris 0 10 * * 6; every 90m`.
    An empty text is no entries. InvalidInput naming `field` for an item that is neither."""
    entries = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        head, _, rest = item.partition(" ")
        if head.lower() == "every":
            duration, _, since = rest.partition(" from ")
            entries.append(ScheduleEntry(every=canonical(duration.strip(), field), anchor=_anchor(since, field)))
        elif head.upper().startswith("TZ="):
            if not rest.strip():
                raise InvalidInput(field, f"{item[:60]!r}: a cron expression after the zone")
            entries.append(ScheduleEntry(cron=rest.strip(), timezone=head[3:]))
        else:
            entries.append(ScheduleEntry(cron=item))
    return entries


def text_of(entries: Sequence[ScheduleEntry]) -> str:
    """Entries as `parse_text` reads them."""
    items = []
    for e in entries:
        if e.every is not None:
            items.append(f"every {e.every}" + ("" if e.anchor is None else f" from {e.anchor.isoformat()}"))
        else:
            items.append(("" if e.timezone is None else f"TZ={e.timezone} ") + str(e.cron))
    return "; ".join(items)


def _anchor(text: str, field: str) -> datetime | None:
    if not text.strip():
        return None
    try:
        anchor = datetime.fromisoformat(text.strip())
    except ValueError:
        anchor = None
    if anchor is None or anchor.tzinfo is None:
        raise InvalidInput(field, f"{text.strip()[:40]!r}: an anchor is an instant with its offset (2026-01-01T00:00Z)")
    return anchor
