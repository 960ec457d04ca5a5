"""Rate limits per endpoint (requests and tokens per minute), in process and in Redis, and
the pause after a 429 shared by every user of the endpoint."""

from __future__ import annotations

import time
import uuid

import pytest

from llm.limits import EndpointLimits, InProcessLimits, RedisLimits
from tests.services import REDIS_URL, reachable, run_coroutine


def _backends():
    backends = [pytest.param(InProcessLimits, id="in-process")]
    backends.append(
        pytest.param(
            lambda: RedisLimits(REDIS_URL, prefix=f"test:{uuid.uuid4().hex}"),
            id="redis",
            marks=pytest.mark.skipif(not reachable(REDIS_URL), reason="Redis is not reachable"),
        )
    )
    return backends


@pytest.mark.parametrize("make", _backends())
def test_requests_per_minute_allow_a_minute_of_burst_then_refill(make):
    limits = make()
    rpm = EndpointLimits(concurrency=4, requests_per_minute=120)  # refills 2 per second
    started = time.monotonic()
    for _ in range(120):
        limits.wait_turn("e", rpm, tokens=1)
    assert time.monotonic() - started < 0.5  # the burst
    limits.wait_turn("e", rpm, tokens=1)
    assert time.monotonic() - started >= 0.45  # the 121st waits for the refill (0.5 s)


@pytest.mark.parametrize("make", _backends())
def test_tokens_per_minute_hold_back_a_large_request(make):
    limits = make()
    tpm = EndpointLimits(concurrency=4, tokens_per_minute=6000)  # 100 tokens per second
    limits.wait_turn("e", tpm, tokens=6000)
    started = time.monotonic()
    limits.wait_turn("e", tpm, tokens=50)
    assert 0.4 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize("make", _backends())
def test_a_429_pause_holds_everyone_back(make):
    limits = make()
    open_limits = EndpointLimits(concurrency=4)
    limits.pause("e", 0.6)
    assert limits.paused_for("e") > 0.3
    started = time.monotonic()
    limits.wait_turn("e", open_limits, tokens=1)
    assert time.monotonic() - started >= 0.5
    assert limits.paused_for("other") == 0


@pytest.mark.parametrize("make", _backends())
def test_a_429_pause_holds_back_the_event_loops_requests_too(make):
    """The asynchronous path, as the online executor and the reward endpoint take it: its turn,
    then its slot (in Redis the pause is checked with the slot, in the same round trip)."""
    limits = make()
    open_limits = EndpointLimits(concurrency=4)
    limits.pause("e", 0.6)

    async def send() -> float:
        started = time.monotonic()
        await limits.wait_turn_async("e", open_limits, 1)
        async with limits.slot_async("e", open_limits):
            return time.monotonic() - started

    assert run_coroutine(send()) >= 0.5
    assert run_coroutine(send()) < 0.3  # the pause is over
    assert limits.in_flight("e") == 0


def test_in_redis_a_pause_that_begins_while_a_request_waits_for_its_slot_holds_it_back():
    """A request past its turn that finds the endpoint paused when it takes its slot waits out
    the pause with no slot taken, then goes (Redis: the pause is checked by the slot's script)."""
    if not reachable(REDIS_URL):
        pytest.skip("Redis is not reachable")
    limits = RedisLimits(REDIS_URL, prefix=f"test:{uuid.uuid4().hex}")
    open_limits = EndpointLimits(concurrency=1)

    async def send() -> tuple[float, int]:
        await limits.wait_turn_async("e", open_limits, 1)  # its turn: not paused yet
        limits.pause("e", 0.6)  # a 429 elsewhere, before this request takes its slot
        started = time.monotonic()
        async with limits.slot_async("e", open_limits):
            return time.monotonic() - started, limits.in_flight("e")

    waited, in_flight = run_coroutine(send())
    assert waited >= 0.5 and in_flight == 1
    assert limits.in_flight("e") == 0


@pytest.mark.parametrize("make", _backends())
def test_slots_count_requests_in_flight(make):
    limits = make()
    cap = EndpointLimits(concurrency=2)
    with limits.slot("e", cap), limits.slot("e", cap):
        assert limits.in_flight("e") == 2
    assert limits.in_flight("e") == 0


@pytest.mark.parametrize("make", _backends())
def test_a_slot_freed_on_the_same_event_loop_wakes_a_waiting_request_at_once(make):
    """With polling slowed to 30 s, a request waiting for the only slot still gets it as soon
    as another request of its loop gives it back (not at its next poll), and never while the
    slot is held."""
    import asyncio

    limits = make()
    limits.SLOT_POLL_MIN = limits.SLOT_POLL_MAX = 30.0
    cap = EndpointLimits(concurrency=1)
    order: list[str] = []

    async def holder(release: asyncio.Event) -> None:
        async with limits.slot_async("e", cap):
            order.append("first in")
            await release.wait()
            order.append("first out")

    async def waiter() -> None:
        async with limits.slot_async("e", cap):
            order.append("second in")

    async def main() -> None:
        release = asyncio.Event()
        first = asyncio.create_task(holder(release))
        while not order:
            await asyncio.sleep(0.01)
        second = asyncio.create_task(waiter())
        await asyncio.sleep(0.2)  # the waiter found the slot taken and is waiting
        assert order == ["first in"]
        release.set()
        await asyncio.wait_for(asyncio.gather(first, second), timeout=10)

    run_coroutine(main())
    assert order == ["first in", "first out", "second in"]
    assert limits.in_flight("e") == 0


@pytest.mark.parametrize("make", _backends())
def test_many_requests_waiting_for_a_slot_held_elsewhere_poll_as_one(make):
    """Twenty requests of one event loop wait while another caller (a thread here, another
    process in production) holds the endpoint's only slot for 0.6 s: one of them polls the
    backend, the others wait to be woken, and every one gets the slot in turn once it is
    given back. Polling each on its own took about 20 x 15 tries in that time."""
    import asyncio
    import threading

    limits = make()
    cap = EndpointLimits(concurrency=1)
    tries = 0
    take = limits._take_slot_async

    async def counted(endpoint, caps):
        nonlocal tries
        tries += 1
        return await take(endpoint, caps)

    limits._take_slot_async = counted
    held, release = threading.Event(), threading.Event()

    def elsewhere() -> None:
        with limits.slot("e", cap):
            held.set()
            release.wait(10)

    other = threading.Thread(target=elsewhere)
    other.start()
    held.wait(10)
    got: list[int] = []

    async def request(i: int) -> None:
        async with limits.slot_async("e", cap):
            got.append(i)
            await asyncio.sleep(0.005)

    async def main() -> int:
        tasks = [asyncio.create_task(request(i)) for i in range(20)]
        await asyncio.sleep(0.6)
        assert got == []  # the slot is held elsewhere all along
        waiting_tries = tries
        release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
        return waiting_tries

    waiting_tries = run_coroutine(main())
    other.join(10)
    assert sorted(got) == list(range(20))
    assert waiting_tries <= 20 + 25, waiting_tries  # each tried once, then one poller backing off to 50 ms
    assert limits.in_flight("e") == 0


@pytest.mark.parametrize("make", _backends())
def test_a_changed_limit_holds_for_the_next_request_on_the_same_endpoint(make):
    """An endpoint's limits are read at each request: one lowered (an admin's edit, or a
    new server on a port an earlier one used) holds at once, not after a restart."""
    limits = make()
    held = [limits._take_slot("e", EndpointLimits(concurrency=16), block=False) for _ in range(3)]
    assert all(holder is not None for holder in held)
    assert limits._take_slot("e", EndpointLimits(concurrency=3), block=False) is None
    limits._free_slot("e", held.pop())  # two held: one more fits under 3
    again = limits._take_slot("e", EndpointLimits(concurrency=3), block=False)
    assert again is not None and limits._take_slot("e", EndpointLimits(concurrency=3), block=False) is None
    # a rate lowered on the same endpoint: the second request of a 1-per-minute limit waits
    limits.wait_turn("r", EndpointLimits(concurrency=4, requests_per_minute=6000), tokens=1)
    assert limits._turn("r", EndpointLimits(concurrency=4, requests_per_minute=1), tokens=1) == 0
    assert limits._turn("r", EndpointLimits(concurrency=4, requests_per_minute=1), tokens=1) > 30
