"""Filtered pages of jobs (a selector, a name search) at any number of jobs: when a page goes on
through the filter's index. Pure.

A filtered page reads a slice of jobs by id from its cursor (SLICE at most, through the primary
key) and keeps the matches: a broad filter fills its page there, whatever PostgreSQL's plan. A
narrow one may not: when the slice was full (more jobs follow it) and the page is not, the rest
of the page is looked up through the filter's index from the slice's end, which reads the
filter's matches only (cronos.store.queries: JOB_LIST_SELECTED and its kin). Either way a page
reads at most SLICE jobs that do not match, where a plain `ORDER BY id LIMIT` walk read every
job for a filter matching none.
"""

from __future__ import annotations

SLICE = 5000  # jobs a filtered page reads by id before it turns to the filter's index


def goes_on(found: int, wanted: int, scanned: int) -> bool:
    """Whether a page that found `found` of the `wanted` jobs in a slice that read `scanned`
    goes on through the index: the slice was full (more jobs follow) and the page is not."""
    return found < wanted and scanned >= SLICE
