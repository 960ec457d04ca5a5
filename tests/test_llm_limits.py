"""Rate limits per endpoint (requests and tokens per minute), in process and in Redis, and
the pause after a 429 shared by every user of the endpoint."""
from __future__ import annotations

import time
import uuid

import pytest

from llm.limits import EndpointLimits, InProcessLimits, RedisLimits
from tests.services import REDIS_URL, reachable


def _backends():
    backends = [pytest.param(InProcessLimits, id="in-process")]
    backends.append(pytest.param(lambda: RedisLimits(REDIS_URL, prefix=f"test:{uuid.uuid4().hex}"), id="redis",
                                 marks=pytest.mark.skipif(not reachable(REDIS_URL), reason="Redis is not reachable")))
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
def test_slots_count_requests_in_flight(make):
    limits = make()
    cap = EndpointLimits(concurrency=2)
    with limits.slot("e", cap), limits.slot("e", cap):
        assert limits.in_flight("e") == 2
    assert limits.in_flight("e") == 0
