"""PostgreSQL notification channels and the statements that notify them (LISTEN/NOTIFY)."""

from __future__ import annotations

# The channel the API notifies in the same transaction as each job write, and on each
# manual trigger. Payload: JSON {"op": "...", "job_id": N}; op is one of
# created, updated, deleted, paused, resumed, triggered; and retry, chain, woken (runs queued by a finish);
# rules (a calendar or blackout changed: job_id null, the leader reloads them).
JOBS_CHANNEL = "cronos_jobs"
NOTIFY = "SELECT pg_notify('cronos_jobs', $1)"
NOTIFY_EACH = "SELECT pg_notify('cronos_jobs', payload) FROM unnest($1::text[]) AS payload"
# The channel the API notifies, in the transaction of a running run's cancel request, for the
# executor running it (cronos.store.cancels.listen). Payload: JSON {"run_id": N, "by": "who"}.
CANCELS_CHANNEL = "cronos_cancels"
NOTIFY_CANCEL = "SELECT pg_notify('cronos_cancels', $1)"


# --- run output's channel -------------------------------------------------------------------------

# Followers (api/output_follow.py) hear which runs wrote: $1 their ids, comma-separated.
OUTPUT_CHANNEL = "cronos_output"
OUTPUT_NOTIFY = "SELECT pg_notify('cronos_output', $1)"
