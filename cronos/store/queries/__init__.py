"""Every SQL statement Cronos runs, as a named constant, one module per aggregate. Run only by
the store classes; each statement is written out as PostgreSQL runs it (tests/unit/test_queries.py).

- `runs`: run transitions, one statement per event of cronos.lifecycle.TRANSITIONS
- `jobs`: jobs, their revisions, chains, calendars, blackouts, pauses and backfills
- `views`: read-only views of runs and jobs (API, console)
- `notifications`: LISTEN/NOTIFY channels
- `groups`: concurrency groups and their slots
- `health`: job health (leader)
- `access`: API tokens, protected mode, the audit trail
- `output`: run output
- `usage`: run usage (wall, CPU, memory)
- `joins`: joins of chain parents per (child, logical tick)
- `upkeep`: liveness, leader epoch, runs partitions, the auditor, the cluster identity
"""
