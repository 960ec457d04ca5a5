"""The worker pool shared by the online LLM executor and the mining runner (llm/worker_pool.py):
bounded concurrency, stop reasons, errors kept and raised once every worker has ended."""

from __future__ import annotations

import threading
import time

import pytest

from llm.worker_pool import ERROR, WorkerPool


def test_exactly_size_workers_run_at_once_and_share_the_work():
    # Each worker holds its first item until four are running together: a pool that ran
    # fewer at once would break the barrier (after a timeout generous for a loaded machine),
    # and one that ran more would show a peak above four.
    items = list(range(40))
    lock = threading.Lock()
    all_started = threading.Barrier(4, timeout=30)
    running, peak, done = 0, 0, []
    met = threading.local()

    def work():
        nonlocal running, peak
        while True:
            with lock:
                if not items:
                    return
                item = items.pop()
                running += 1
                peak = max(peak, running)
            if not getattr(met, "done", False):
                met.done = True
                all_started.wait()
            time.sleep(0.001)
            with lock:
                running -= 1
                done.append(item)

    pool = WorkerPool(size=4, name="test", tick_seconds=0.01)
    assert pool.run(work, tick=lambda: None) is None
    assert not all_started.broken
    assert sorted(done) == list(range(40))
    assert peak == 4


def test_a_reason_from_the_supervising_tick_halts_the_workers_and_is_returned():
    halted: list[str] = []
    ticks = []

    def tick():
        ticks.append(1)
        return "paused" if len(ticks) >= 2 else None

    pool = WorkerPool(size=3, name="test", tick_seconds=0.01, on_halt=halted.append)

    def work():
        while not pool.stopped:
            time.sleep(0.002)

    assert pool.run(work, tick=tick) == "paused"
    assert halted and set(halted) == {"paused"}


def test_the_first_reason_wins():
    pool = WorkerPool(size=2, name="test", tick_seconds=0.01)

    def work():
        pool.halt("budget reached")
        time.sleep(0.02)

    assert pool.run(work, tick=lambda: "cancelled") == "budget reached"


def test_a_worker_error_stops_the_others_and_is_raised_after_they_ended():
    ended = []
    pool = WorkerPool(size=3, name="test", tick_seconds=0.01)
    started = threading.Barrier(3)

    def work():
        started.wait(timeout=5)
        if threading.current_thread().name.endswith("_0"):
            raise LookupError("broken")
        while not pool.stopped:
            time.sleep(0.002)
        ended.append(pool.stop)

    with pytest.raises(LookupError, match="broken"):
        pool.run(work, tick=lambda: None)
    assert ended == [ERROR, ERROR]


def test_an_error_reported_with_fail_is_raised_by_run():
    pool = WorkerPool(size=1, name="test", tick_seconds=0.01)

    def work():
        pool.fail(KeyError("from a coroutine"))

    with pytest.raises(KeyError):
        pool.run(work, tick=lambda: None)
    assert pool.stop == ERROR


def test_an_error_in_the_supervising_thread_halts_and_waits_for_the_workers():
    pool = WorkerPool(size=2, name="test", tick_seconds=0.01)
    ended = []

    def work():
        while not pool.stopped:
            time.sleep(0.002)
        ended.append(1)

    def tick():
        raise RuntimeError("database gone")

    with pytest.raises(RuntimeError, match="database gone"):
        pool.run(work, tick=tick)
    assert ended == [1, 1]
    assert pool.stop == ERROR
