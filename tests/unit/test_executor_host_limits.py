"""executor.host_limits: places at a host, its line, giving up, cancels and lent execution slots
(no I/O: requests are coroutines holding a place until the test lets them go)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import pytest

from cronos.host_limits import parse_host_limits
from cronos.tasks import Cancellation
from executor import host_limits
from executor.host_limits import HostLimiter, HostWaitEnded
from tests.waiting import wait_for

A = ("https", "a.example", 443)
B = ("https", "b.example", 443)
KEY_A = "https://a.example:443"


@dataclass
class Requests:
    """Requests holding a place until released, in the order they got one."""

    limiter: HostLimiter
    started: list[str] = field(default_factory=list)
    release: dict[str, asyncio.Event] = field(default_factory=dict)
    tasks: dict[str, asyncio.Task[float]] = field(default_factory=dict)

    def send(
        self,
        name: str,
        origin: tuple[str, str, int] = A,
        job_limit: int | None = None,
        give_up_s: float = 60.0,
        cancellation: Cancellation | None = None,
    ) -> None:
        self.release[name] = asyncio.Event()
        give_up_at = asyncio.get_running_loop().time() + give_up_s
        self.tasks[name] = asyncio.create_task(
            self._hold(name, origin, job_limit, give_up_at, cancellation or Cancellation())
        )

    async def _hold(
        self, name: str, origin: tuple[str, str, int], job_limit: int | None, give_up_at: float, stop: Cancellation
    ) -> float:
        async with self.limiter.place(*origin, job_limit, give_up_at=give_up_at, cancellation=stop) as waited:
            self.started.append(name)
            await self.release[name].wait()
        return waited

    async def until_started(self, *names: str) -> None:
        async def probe() -> bool:
            return set(names) <= set(self.started)

        await wait_for(probe, timeout=5, interval=0.001, what=f"{names} started")

    async def until_waiting(self, key: str, count: int) -> None:
        async def probe() -> bool:
            return self.limiter.waiting(key) == count

        await wait_for(probe, timeout=5, interval=0.001, what=f"{count} waiting for {key}")


@dataclass
class FakeSlots:
    """The gate's side of lending: counts what the limiter does."""

    lent: int = 0
    reclaimed: int = 0
    retaken: int = 0

    def lend(self) -> None:
        self.lent += 1

    async def reclaim(self) -> None:
        self.reclaimed += 1

    def retake(self) -> None:
        self.retaken += 1


async def test_at_most_the_limit_in_flight_and_the_rest_in_line_in_order() -> None:
    requests = Requests(HostLimiter(parse_host_limits("a.example=2")))
    for name in "12345":
        requests.send(name)
    await requests.until_started("1", "2")
    await requests.until_waiting(KEY_A, 3)
    assert requests.limiter.in_flight(KEY_A) == 2 and requests.started == ["1", "2"]
    for done, then in (("1", "3"), ("2", "4"), ("3", "5")):
        requests.release[done].set()
        await requests.until_started(then)
        assert requests.limiter.in_flight(KEY_A) == 2
    for name in "45":
        requests.release[name].set()
    waited = await asyncio.gather(*requests.tasks.values())
    assert requests.started == list("12345") and waited[:2] == [0.0, 0.0] and min(waited[2:]) > 0
    assert requests.limiter.in_flight(KEY_A) == 0 and requests.limiter.tracked == 0  # nothing kept per host


async def test_another_host_is_not_held_up() -> None:
    requests = Requests(HostLimiter(parse_host_limits("a.example=1")))
    requests.send("a1")
    requests.send("a2")
    await requests.until_waiting(KEY_A, 1)
    requests.send("b1", B)
    requests.send("b2", B)
    await requests.until_started("b1", "b2")  # b.example has the default limit: both at once
    assert requests.started == ["a1", "b1", "b2"]
    for event in requests.release.values():
        event.set()
    await asyncio.gather(*requests.tasks.values())


async def test_a_jobs_lower_limit_waits_at_the_head_and_nobody_overtakes_it() -> None:
    requests = Requests(HostLimiter(parse_host_limits("a.example=3")))
    requests.send("1")
    requests.send("2")
    await requests.until_started("1", "2")
    requests.send("gentle", job_limit=1)  # starts only while nothing else is in flight there
    requests.send("3")  # could go (2 < 3) but the gentle one is first in line
    await requests.until_waiting(KEY_A, 2)
    requests.release["1"].set()
    await requests.until_waiting(KEY_A, 2)
    assert requests.started == ["1", "2"]
    requests.release["2"].set()
    await requests.until_started("gentle", "3")
    assert requests.started == ["1", "2", "gentle", "3"]
    for event in requests.release.values():
        event.set()
    await asyncio.gather(*requests.tasks.values())


async def test_a_job_cannot_raise_its_hosts_limit() -> None:
    requests = Requests(HostLimiter(parse_host_limits("a.example=1")))
    requests.send("1", job_limit=50)
    requests.send("2", job_limit=50)
    await requests.until_waiting(KEY_A, 1)
    assert requests.started == ["1"]
    for event in requests.release.values():
        event.set()
    await asyncio.gather(*requests.tasks.values())


async def test_no_limit_for_a_host_given_zero() -> None:
    requests = Requests(HostLimiter(parse_host_limits("*=0")))
    for name in map(str, range(50)):
        requests.send(name)
    await requests.until_started(*map(str, range(50)))
    assert requests.limiter.waiting(KEY_A) == 0
    for event in requests.release.values():
        event.set()
    await asyncio.gather(*requests.tasks.values())


async def test_a_wait_past_its_time_fails_naming_the_host_and_leaves_the_line() -> None:
    slots = FakeSlots()
    requests = Requests(HostLimiter(parse_host_limits("a.example=1"), slots=slots))
    requests.send("1")
    await requests.until_started("1")
    requests.send("late", give_up_s=0.05)
    requests.send("next")
    with pytest.raises(HostWaitEnded) as info:
        await requests.tasks["late"]
    message = info.value.message
    assert message.startswith("waited 0.") and "s for a connection slot to host https://a.example:443" in message
    assert "1 requests in flight there (limit 1), 1 more waiting" in message
    assert requests.limiter.waiting(KEY_A) == 1  # `next` still waits; `late` left the line
    assert (slots.lent, slots.retaken) == (2, 1)  # `late` lent its slot and took it back as it failed
    requests.release["1"].set()
    await requests.until_started("next")
    assert slots.reclaimed == 1  # `next` took its slot back before its request
    requests.release["next"].set()
    await asyncio.gather(requests.tasks["1"], requests.tasks["next"])
    assert requests.limiter.tracked == 0


async def test_a_cancel_ends_the_wait_at_once() -> None:
    requests = Requests(HostLimiter(parse_host_limits("a.example=1")))
    requests.send("1")
    await requests.until_started("1")
    cancellation = Cancellation()
    requests.send("cancelled", cancellation=cancellation)
    await requests.until_waiting(KEY_A, 1)
    cancellation.set("cancelled by ops")
    with pytest.raises(
        HostWaitEnded, match=r"cancelled while waiting for a connection slot to host https://a\.example:443"
    ):
        await asyncio.wait_for(requests.tasks["cancelled"], 5)
    assert requests.limiter.waiting(KEY_A) == 0
    requests.release["1"].set()
    await requests.tasks["1"]


async def test_a_run_cancelled_while_waiting_passes_its_turn_on() -> None:
    slots = FakeSlots()
    requests = Requests(HostLimiter(parse_host_limits("a.example=1"), slots=slots))
    requests.send("1")
    await requests.until_started("1")
    requests.send("gone")
    requests.send("next")
    await requests.until_waiting(KEY_A, 2)
    requests.release["1"].set()
    requests.tasks["gone"].cancel()  # its turn comes and it is cancelled in the same step (a drain)
    with pytest.raises(asyncio.CancelledError):
        await requests.tasks["gone"]
    await requests.until_started("next")
    assert requests.limiter.in_flight(KEY_A) == 1 and slots.retaken == 1
    requests.release["next"].set()
    await asyncio.gather(requests.tasks["1"], requests.tasks["next"])
    assert requests.limiter.tracked == 0


async def test_a_request_that_goes_at_once_lends_nothing() -> None:
    slots = FakeSlots()
    requests = Requests(HostLimiter(slots=slots))
    requests.send("1")
    requests.release["1"].set()
    assert await requests.tasks["1"] == 0.0
    assert (slots.lent, slots.reclaimed, slots.retaken) == (0, 0, 0)


async def test_a_long_wait_is_logged_once(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_limits, "LONG_WAIT_S", 0.02)
    requests = Requests(HostLimiter(parse_host_limits("a.example=1")))
    requests.send("1")
    await requests.until_started("1")
    with caplog.at_level(logging.WARNING, logger="cronos.executor"):
        requests.send("2")

        async def told() -> list[logging.LogRecord]:
            return [r for r in caplog.records if getattr(r, "event", None) == "http.host_wait_long"]

        (record,) = await wait_for(told, timeout=5, what="the long wait's log line")
        assert record.host == KEY_A and record.limit == 1 and record.in_flight == 1  # type: ignore[attr-defined]
        requests.release["1"].set()
        requests.release["2"].set()
        await asyncio.gather(*requests.tasks.values())
    assert len(await told()) == 1
