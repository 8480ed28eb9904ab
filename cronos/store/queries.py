"""Every SQL statement Cronos runs, as a named constant. Run only by the store classes.

Sections: jobs (API), ledger (dispatcher), runs (executor), leader epoch.
"""

from __future__ import annotations

# The channel the API notifies in the same transaction as each job write, and on each
# manual trigger. Payload: JSON {"op": "...", "job_id": N}; op is one of
# created, updated, deleted, paused, resumed, triggered.
JOBS_CHANNEL = "cronos_jobs"

NOTIFY = "SELECT pg_notify('" + JOBS_CHANNEL + "', $1)"

# --- jobs (API) ---------------------------------------------------------------

# --- ledger (dispatcher) ------------------------------------------------------

# --- runs (executor) ----------------------------------------------------------

# --- leader epoch -------------------------------------------------------------
