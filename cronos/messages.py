"""What travels on the run stream: a versioned, frozen run token.

Schema evolution: new fields always get a default and unknown fields are tolerated,
so an executor one release behind keeps working during a rolling deploy.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

TOKEN_VERSION = 1
TOKEN_FIELD = b"t"


class RunToken(msgspec.Struct, frozen=True, kw_only=True, array_like=False):
    v: int = TOKEN_VERSION
    run_id: int
    job_id: int
    scheduled_for_ms: int  # UTC epoch milliseconds: the tick's identity together with job_id and attempt
    attempt: int = 1
    # A Trigger, read as any string: a trigger added later (as `chain` was) must not make an
    # executor one release behind drop the token as malformed.
    trigger: str = "schedule"
    epoch: int = 0
    # UTC epoch ms when the run may start, set when the token is pushed ahead of it (the
    # leader's push lead): the executor locks at once, then claims at this instant. None
    # (tokens from an older leader): due when pushed. Never earlier than scheduled_for_ms.
    due_ms: int | None = None
    # A task job's `payload.action`: an executor that has no task of that name leaves the token
    # for one that has (executor.routing) before it locks or claims. None: not a task job, or a
    # token from an older leader (claimed as before).
    action: str | None = None
    # The run's expiry, UTC epoch ms: the instant stamped on it once, when it was created
    # (cronos.lifecycle.expiry, runs.expires_at), which the claim and the reaper judge it by too:
    # a token read later is acknowledged unclaimed (executor.pipeline), as the run can only end
    # skipped "expired", which the leader's reaper does a page at a time. The release before
    # pushed the same instant here (its due time plus its job's grace, at least ON_TIME_S). None:
    # a token from an older leader: claimed, and the claim judges it by the run's stamped expiry.
    expires_ms: int | None = None
    # A shell job's run: an executor without CRONOS_ALLOW_SHELL=1 leaves the token for one with it
    # (executor.routing), as for a missing action. False from an older leader: claimed as before.
    shell: bool = False
    # UTC epoch ms when the leader wrote this tick, stamped only while traces are on
    # (docs/tracing.md): the run's span starts there. Unset, it is not encoded at all.
    written_ms: int | UnsetType = UNSET
    # A per-host run's executor (cronos.every_host): any other leaves the token for it
    # (executor.routing). None: any executor of the queue (an older leader's tokens too).
    host: str | None = None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(RunToken)


def encode_token(token: RunToken) -> bytes:
    return _encoder.encode(token)


def decode_token(raw: bytes) -> RunToken:
    """Raises msgspec.DecodeError/ValidationError for a malformed token."""
    return _decoder.decode(raw)
