from __future__ import annotations

import msgspec
import pytest

from cronos.messages import TOKEN_VERSION, RunToken, decode_token, encode_token
from cronos.store.ledger import QueuedRun
from dispatcher.publisher import token_of
from executor.pipeline import past_grace


def test_token_round_trips() -> None:
    token = RunToken(run_id=7, job_id=3, scheduled_for_ms=1_700_000_000_000, attempt=2, trigger="retry", epoch=9)
    assert decode_token(encode_token(token)) == token
    assert token.v == TOKEN_VERSION


def test_token_from_a_newer_release_with_unknown_fields_still_decodes() -> None:
    newer = {"v": 2, "run_id": 1, "job_id": 2, "scheduled_for_ms": 5, "attempt": 1, "shard": 4, "priority": "high"}
    token = decode_token(msgspec.msgpack.encode(newer))
    assert (token.run_id, token.job_id, token.scheduled_for_ms, token.v) == (1, 2, 5, 2)


def test_token_from_an_older_release_gets_defaults() -> None:
    older = {"run_id": 1, "job_id": 2, "scheduled_for_ms": 5}
    token = decode_token(msgspec.msgpack.encode(older))
    assert (token.attempt, token.trigger, token.epoch, token.due_ms, token.expires_ms) == (1, "schedule", 0, None, None)


def test_token_pushed_ahead_carries_its_due_time() -> None:
    token = RunToken(run_id=1, job_id=2, scheduled_for_ms=5_000, due_ms=5_300)
    assert decode_token(encode_token(token)).due_ms == 5_300


def test_token_with_a_due_time_decodes_for_an_older_reader() -> None:
    class OlderToken(msgspec.Struct, frozen=True, kw_only=True):  # the previous release's RunToken
        run_id: int
        job_id: int
        scheduled_for_ms: int

    raw = encode_token(RunToken(run_id=1, job_id=2, scheduled_for_ms=5_000, due_ms=5_000))
    assert msgspec.msgpack.decode(raw, type=OlderToken) == OlderToken(run_id=1, job_id=2, scheduled_for_ms=5_000)


def test_malformed_token_is_rejected() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_token(msgspec.msgpack.encode({"run_id": "x", "job_id": 2, "scheduled_for_ms": 5}))


def test_token_is_frozen() -> None:
    token = RunToken(run_id=1, job_id=2, scheduled_for_ms=3)
    with pytest.raises(AttributeError):
        token.run_id = 5  # type: ignore[misc]


def test_a_trigger_this_release_does_not_know_still_decodes() -> None:
    """A newer leader's trigger (as `chain` was new) must not make an older executor drop the token."""
    raw = msgspec.msgpack.encode({"v": 1, "run_id": 1, "job_id": 2, "scheduled_for_ms": 3, "trigger": "later"})
    assert decode_token(raw).trigger == "later"


@pytest.mark.parametrize("expires_ms", [65_300, None])
def test_a_token_carries_its_runs_stamped_expiry(expires_ms: int | None) -> None:
    """The instant stamped on the run when it was created (lifecycle.expiry), as written; a run
    queued by an older leader carries none."""
    run = QueuedRun(1, 2, 5_000, 1, "schedule", 5_300, expires_ms=expires_ms)
    token = decode_token(encode_token(token_of(run, epoch=3, due_ms=5_300)))
    assert token.expires_ms == expires_ms


def test_a_token_of_an_older_leader_without_an_expiry_is_claimed() -> None:
    """A token pushed before runs carried their expiry has no such field: it decodes, and the
    executor does not take it as past its grace (the claim judges its run by the stamped column)."""
    raw = msgspec.msgpack.encode({"v": 1, "run_id": 1, "job_id": 2, "scheduled_for_ms": 3, "due_ms": 3})
    token = decode_token(raw)
    assert token.expires_ms is None
    assert not past_grace(token, 10**12)


@pytest.mark.parametrize(
    ("now_ms", "expires_ms", "past"),
    [(65_999, 65_000, False), (66_000, 65_000, True), (10**12, None, False)],  # now >= expiry + margin
)
def test_an_executor_takes_a_token_as_past_its_grace_only_beyond_the_margin(
    now_ms: int, expires_ms: int | None, past: bool
) -> None:
    token = RunToken(run_id=1, job_id=2, scheduled_for_ms=5_000, expires_ms=expires_ms)
    assert past_grace(token, now_ms / 1000) is past
