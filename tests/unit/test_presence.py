"""Reading executors' presence: which live executor can run a run (its queue, task action, shell:
presence.can_run), and what /api/cluster reports as unserved."""

from __future__ import annotations

import itertools
import json

import msgspec

from api.cluster import unserved
from cronos import presence
from cronos.messages import RunToken, decode_token, encode_token
from cronos.presence import Needs
from executor.routing import HOP_CAP_S, hop_delay_s


def _executor(
    node: str,
    queues: str,
    actions: list[str] | None,
    seen: list[list[str | None]] | None = None,
    shell: str | None = None,
) -> dict[str, str]:
    raw = {"role": "executor", "node_id": node, "queues": queues}
    if shell is not None:
        raw["shell"] = shell
    if actions is not None:
        raw["actions"] = json.dumps(actions)
    if seen is not None:
        raw["unserved"] = json.dumps(seen)
    return raw


def test_an_executor_serves_its_queues_actions_only() -> None:
    node = _executor("a", "default,gpu", ["hello", "noop"])
    assert presence.serves(node, Needs("gpu", "hello"))
    assert not presence.serves(node, Needs("gpu", "other"))
    assert not presence.serves(node, Needs("edge", "hello"))  # not its queue
    assert not presence.serves({"role": "dispatcher", "node_id": "d", "queues": "default"}, Needs("default", "hello"))


def test_an_executor_announcing_no_actions_is_taken_to_serve_all_as_older_releases_did() -> None:
    old = _executor("old", "default", None)
    assert presence.actions_of(old) is None and presence.serves(old, Needs("default", "anything"))
    garbled = {**old, "actions": "not json"}
    assert presence.serves(garbled, Needs("default", "anything"))
    assert presence.serves(old, Needs("default", shell=True))  # nor whether it allows shell: it claims it


def test_servers_leave_out_the_asking_node() -> None:
    found = [_executor("a", "default", ["hello"]), _executor("b", "default", ["hello"]), _executor("c", "x", ["hello"])]
    assert presence.servers(found, Needs("default", "hello")) == ["a", "b"]
    assert presence.servers(found, Needs("default", "hello"), but="a") == ["b"]
    assert presence.servers(found, Needs("default", "other")) == []


def test_a_shell_run_goes_only_to_an_executor_that_allows_shell() -> None:
    cap = presence.Capability(("default",), frozenset({"hello"}), shell=False)
    assert presence.can_run(cap, "default", None, False)  # an http job: any executor of the queue
    assert presence.can_run(cap, "default", "hello", False)
    assert not presence.can_run(cap, "default", None, True)
    assert presence.can_run(presence.Capability(("default",), frozenset(), shell=True), "default", None, True)
    assert not presence.can_run(presence.Capability(("gpu",), None, shell=True), "default", None, True)
    found = [_executor("no", "default", ["hello"], shell="0"), _executor("yes", "default", [], shell="1")]
    assert presence.servers(found, Needs("default", shell=True)) == ["yes"]
    assert presence.servers(found, Needs("default", shell=True), but="yes") == []
    assert presence.capability_of(found[0]) == presence.Capability(["default"], ["hello"], shell=False)


def test_unserved_lists_what_is_still_unserved_with_its_reporters() -> None:
    found = [
        _executor("a", "default", ["noop"], [["default", "hello"], ["default", "late"]]),
        _executor("b", "default", ["late"], [["default", "hello"]]),
    ]
    out = unserved(found)
    assert [(u.queue, u.action, u.reported_by) for u in out] == [("default", "hello", ["a", "b"])]  # b serves late now
    assert out[0].message == "no live executor of queue 'default' serves action 'hello': its runs wait queued"
    # malformed entries dropped
    assert presence.unserved_of({"unserved": '[["q"], 3, ["q", "a"], ["q", null, "x"]]'}) == [Needs("q", "a")]


def test_shell_runs_reported_unserved_until_an_executor_allows_shell() -> None:
    seen: list[list[str | None]] = [Needs("default", shell=True).entry()]
    found = [_executor("a", "default", ["noop"], seen, shell="0")]
    [out] = unserved(found)
    assert (out.queue, out.action, out.shell, out.reported_by) == ("default", None, True, ["a"])
    assert out.message == "no live executor of queue 'default' runs shell jobs: its runs wait queued"
    assert unserved([*found, _executor("b", "default", [], shell="1")]) == []


def test_hand_overs_wait_longer_each_time_up_to_a_cap() -> None:
    delays = [hop_delay_s(n) for n in range(8)]
    assert delays[0] == 0.0  # the first hand-over is immediate
    assert all(a < b for a, b in itertools.pairwise(delays[1:6]))
    assert max(delays) == HOP_CAP_S


def test_a_token_carries_its_action_and_an_older_token_decodes_without_one() -> None:
    token = RunToken(run_id=1, job_id=2, scheduled_for_ms=3, action="hello")
    assert decode_token(encode_token(token)).action == "hello"
    older = msgspec.msgpack.encode({"v": 1, "run_id": 1, "job_id": 2, "scheduled_for_ms": 3})  # an older leader's
    assert decode_token(older).action is None
    assert decode_token(older).shell is False  # an older leader's token: claimed as before
    assert decode_token(encode_token(msgspec.structs.replace(token, shell=True))).shell is True
