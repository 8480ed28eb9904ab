"""POST /api/runs/{id}/cancel: end a run that has not started, or ask its executor to stop it.

200: the run was queued, waiting or reserved (not started yet) and is `cancelled` now. 202: it is
running; its executor signals the work at once (or at its next heartbeat) and records it
`cancelled` (after the grace, by force), so the run shown is still `running`. 409 when the run has
ended already; 404 for no such run.
Who asked is the run's error ("cancelled by <token>") and an audit entry of its job. A run of a
shell job is an admin's to cancel (api.shell_authority), checked under the run's row lock.
"""

from __future__ import annotations

from aiohttp import web

from api.auth import principal_of
from api.bodies import path_id, respond, run_out
from api.routing import DB_ERRORS, ID, Route
from api.schemas import RunOut
from api.shell_authority import guard_for
from api.state import BACKENDS
from cronos.errors import Conflict, NotFound
from cronos.store.cancels import CancelStore


async def cancel_run(request: web.Request) -> web.Response:
    backends = request.app[BACKENDS]
    principal = principal_of(request)
    cancels = CancelStore(await backends.pool())
    done = await cancels.cancel(path_id(request), actor=principal.name, guard=guard_for(principal, "cancel"))
    run = await (await backends.jobs()).run(done.run_id)
    return respond(run_out(run, detail=True), status=200 if done.ended else 202)


ROUTES = (
    Route("POST", f"/api/runs/{ID}/cancel", cancel_run,
          "Cancel a run: a queued, waiting or reserved one ends `cancelled` at once (200); a running one's "
          "executor is asked to stop it (202: still `running`, then `cancelled`); 409 when it has ended",
          response=RunOut, errors=(NotFound, Conflict, *DB_ERRORS),
          also=((202, "running: its executor was asked to stop it (the run as it is now)", RunOut),)),
)  # fmt: skip
