"""Chains (Dkron's parent/child): the checks on a job's `parents`, run in the job write's transaction.

A job names parent jobs by id; it runs after each successful run of each of them (the run is
queued by the parent's finish: queries.FINISH_RUNS). Here, before the write: every parent must
exist (and is share-locked so it cannot be deleted before the write commits), and the parents
must not close a cycle (the cycle is spelled out in the 422). A trigger's caller may need to know
the shell jobs its run would set off down the chain (`shell_descendant`). Changes of parents take turns
(queries.CHAIN_LOCK), so two concurrent writes cannot close one cycle between them. A job that
other jobs name as a parent cannot be deleted (409 naming them), as in Dkron: remove it from
their parents first.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from cronos.errors import Conflict, InvalidInput
from cronos.store.db import translate_errors
from cronos.store.queries import jobs as jobs_q

FIELD = "$.parents"
_CHILDREN_SHOWN = 10


def duplicate(parents: Sequence[int]) -> int | None:
    """A parent named twice, or None."""
    seen: set[int] = set()
    for parent in parents:
        if parent in seen:
            return parent
        seen.add(parent)
    return None


async def take_turn(conn: asyncpg.Connection) -> None:
    """Wait for other writes of parents to commit; call it first in the transaction, before any
    row lock (a job's row lock, then this, in another order could deadlock)."""
    await conn.execute(jobs_q.CHAIN_LOCK)


async def check_parents(conn: asyncpg.Connection, job_id: int | None, parents: Sequence[int], namespace: str) -> None:
    """Refuse (InvalidInput on `$.parents`) parents that do not exist or that would make `job_id`
    (None: a job being created, which no job can name yet) its own ancestor, or that are in
    another namespace than the job's (a chain stays within its namespace). Call it in the
    write's transaction, after take_turn, before the write, whenever the parents change."""
    if (twice := duplicate(parents)) is not None:
        raise InvalidInput(FIELD, f"names job {twice} twice")
    if job_id is not None and job_id in parents:
        raise InvalidInput(FIELD, f"a job cannot be its own parent (cycle: {job_id} -> {job_id})")
    rows = await conn.fetch(jobs_q.CHAIN_PARENTS_LOCK, list(parents))
    found = {r["id"] for r in rows}
    if missing := [p for p in parents if p not in found]:
        raise InvalidInput(FIELD, f"no job {missing[0]}")
    if foreign := [r for r in rows if r["namespace"] != namespace]:
        raise InvalidInput(
            FIELD, f"job {foreign[0]['id']} is in namespace {foreign[0]['namespace']!r}, not {namespace!r}: "
            "a chain stays within its namespace"
        )  # fmt: skip
    if job_id is None:
        return
    # Walk towards the roots, each job once; `below[a] = b`: a is a parent of b on the way up.
    below: dict[int, int] = {p: job_id for p in parents}
    while rows:
        frontier: list[int] = []
        for row in rows:
            for ancestor in row["parents"]:
                if ancestor == job_id:
                    raise InvalidInput(FIELD, await _cycle_text(conn, job_id, row["id"], below))
                if ancestor not in below:
                    below[ancestor] = row["id"]
                    frontier.append(ancestor)
        rows = await conn.fetch(jobs_q.CHAIN_PARENTS_OF, frontier) if frontier else []


async def _cycle_text(conn: asyncpg.Connection, job_id: int, top: int, below: dict[int, int]) -> str:
    """The cycle in run order: job_id runs before `top`, which runs before below[top], ... job_id."""
    path = [job_id, top]
    while path[-1] != job_id:
        path.append(below[path[-1]])
    names = {r["id"]: r["name"] for r in await conn.fetch(jobs_q.CHAIN_NAMES, path)}
    shown = " -> ".join(f"{i} ({names[i]})" if i in names else str(i) for i in path)
    return f"would make a cycle: {shown} (each job runs after the one before it)"


async def refuse_delete_of_parent(conn: asyncpg.Connection, job_id: int) -> None:
    """Conflict when jobs name `job_id` as a parent. Call it holding the job's row lock: a write
    naming it as a parent share-locks its row, so none can commit after this check."""
    children = await conn.fetch(jobs_q.CHAIN_CHILDREN, job_id, _CHILDREN_SHOWN)
    if children:
        named = ", ".join(f"{r['id']} ({r['name']})" for r in children)
        raise Conflict(f"job {job_id} is a parent of job(s) {named}: remove it from their `parents` first")


async def shell_descendant(db: asyncpg.Pool | asyncpg.Connection, job_id: int) -> tuple[int, str] | None:
    """The first shell job (id, name) among `job_id`'s chain descendants at any depth, or None:
    a run of `job_id` that succeeds sets them off."""
    with translate_errors():
        row = await db.fetchrow(jobs_q.CHAIN_SHELL_DESCENDANT, job_id)
    return None if row is None else (row["id"], row["name"])
