"""Runs on every host: which executors get a run of a per-host tick (cronos.every_host, pure)."""

from __future__ import annotations

from cronos import presence
from cronos.every_host import Host, HostSpec, choose, hosts_of, labels_of, parse_label, spec_of

NEEDS = presence.Needs("default", "report")


def _host(node: str, queues: tuple[str, ...] = ("default",), labels: dict[str, str] | None = None) -> Host:
    return Host(node, presence.Capability(queues, None, None), labels or {})


def test_every_able_executor_of_the_queue_gets_one_run() -> None:
    hosts = [_host("b"), _host("a"), _host("c", ("other",)), _host("a")]
    assert choose(HostSpec(), 7, NEEDS, hosts) == ["a", "b"]  # each once, sorted; not another queue's


def test_an_executor_without_the_action_or_shell_gets_none() -> None:
    able = Host("a", presence.Capability(("default",), {"report"}, False))
    other = Host("b", presence.Capability(("default",), {"backup"}, True))
    assert choose(HostSpec(), 1, NEEDS, [able, other]) == ["a"]
    assert choose(HostSpec(), 1, presence.Needs("default", shell=True), [able, other]) == ["b"]


def test_count_picks_the_same_hosts_while_the_fleet_holds_and_moves_only_a_leavers_share() -> None:
    fleet = [_host(f"n{i}") for i in range(10)]
    picked = choose(HostSpec(count=3), 42, NEEDS, fleet)
    assert len(picked) == 3
    assert choose(HostSpec(count=3), 42, NEEDS, list(reversed(fleet))) == picked  # order of presence: no matter
    gone = picked[0]
    after = choose(HostSpec(count=3), 42, NEEDS, [h for h in fleet if h.node_id != gone])
    assert len(set(after) & set(picked)) == 2  # the two that stay keep their runs
    not_picked = next(h.node_id for h in fleet if h.node_id not in picked)
    assert choose(HostSpec(count=3), 42, NEEDS, [h for h in fleet if h.node_id != not_picked]) == picked
    spread = {tuple(choose(HostSpec(count=1), job, NEEDS, fleet)) for job in range(50)}
    assert len(spread) > 3  # jobs land on different hosts, not all on the first


def test_a_label_keeps_only_the_executors_announcing_it() -> None:
    hosts = [_host("a", labels={"rack": "x"}), _host("b", labels={"rack": "y"}), _host("c")]
    assert choose(HostSpec(label=("rack", "x")), 1, NEEDS, hosts) == ["a"]
    assert choose(HostSpec(label=("rack", "z")), 1, NEEDS, hosts) == []


def test_the_stored_spec_and_the_presence_fields_are_read_leniently() -> None:
    assert spec_of(None) is None
    assert spec_of({}) == HostSpec()
    assert spec_of({"count": 2, "label": "rack=x"}) == HostSpec(2, ("rack", "x"))
    assert spec_of({"count": 0, "label": "rack"}) == HostSpec()
    assert parse_label("a=b=c") == ("a", "b=c")
    assert parse_label("=b") is None
    assert labels_of("rack=x, zone=eu ,bad,") == {"rack": "x", "zone": "eu"}
    nodes = [
        {"role": "executor", "node_id": "a", "queues": "default", "labels": "rack=x"},
        {"role": "dispatcher", "node_id": "d"},
        {"role": "executor", "node_id": "", "queues": "default"},
    ]
    (found,) = hosts_of(nodes)
    assert (found.node_id, dict(found.labels), list(found.capability.queues)) == ("a", {"rack": "x"}, ["default"])


def test_a_per_host_token_is_served_only_by_its_host() -> None:
    nodes = [{"role": "executor", "node_id": n, "queues": "default"} for n in ("a", "b")]
    needs = presence.Needs("default", host="b")
    assert presence.servers(nodes, needs) == ["b"]
    assert presence.servers(nodes, needs, but="b") == []
    assert needs.what() == "host 'b'"
