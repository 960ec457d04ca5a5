"""The online executor on one event loop: results written in groups lose nothing and send
nothing twice (pause, cancel, resume, a request repeated in a job, a failure asked again),
the attempt loop behaves the same on both clients, and the limits hold for asynchronous
callers (slots, rates, the 429 pause) on both backends."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from llm.client import LLMClient
from llm.endpoints import endpoint_get
from llm.ledger import ledger_write, ledger_write_many
from llm.limits import EndpointLimits, InProcessLimits, RedisLimits
from llm.models import LedgerEntry, LLMJob
from llm.request import LLMRequest
from llm.services import llm_job_create, llm_job_execute, llm_job_pause, llm_job_resume
from tests.scripted_llm import Reply, ScriptedLLM, Status, last_user_message
from tests.services import REDIS_URL, reachable, run_coroutine

pytestmark = pytest.mark.django_db(transaction=True)


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def _requests(n: int, prefix: str = "question") -> list[LLMRequest]:
    return [
        LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": f"{prefix} {i}"}], schema=SCHEMA)
        for i in range(n)
    ]


def _answer(body):
    return Reply(json.dumps({"answer": int(last_user_message(body).split()[-1])}))


@pytest.fixture
def server(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    with ScriptedLLM(latency=0.02) as scripted:
        scripted.default = _answer
        roles = dict(settings.LLM_ROLES)
        roles["llm_filter"] = {
            "base_url": scripted.base_url,
            "api_key": "sk-secret-key-1234",
            "model": "m",
            "temperature": None,
            "max_tokens": None,
        }
        settings.LLM_ROLES = roles
        yield scripted


def _sent(server) -> Counter:
    return Counter(last_user_message(body) for body in server.chat_requests())


def test_a_job_larger_than_a_write_group_stores_every_answer_once(server):
    job = llm_job_create(run="groups", role="llm_filter", requests=_requests(300), concurrency=40, start=False)
    assert llm_job_execute(job_id=job.pk) == "done"
    assert LedgerEntry.objects.filter(key__in=job.keys, outcome="ok").count() == 300
    assert max(_sent(server).values()) == 1 and len(_sent(server)) == 300
    job.refresh_from_db()
    assert job.n_done == 300 and job.outcome_counts == {"ok": 300}


def test_a_paused_job_has_written_everything_it_received_and_its_resume_sends_nothing_twice(server):
    job = llm_job_create(run="pause", role="llm_filter", requests=_requests(200), concurrency=4, start=False)
    server.latency = 0.05

    def pause_soon():
        time.sleep(1.2)
        llm_job_pause(job=job)

    threading.Thread(target=pause_soon).start()
    assert llm_job_execute(job_id=job.pk) == "paused"
    answered = len(server.chat_requests())
    assert 0 < answered < 200
    # every answer the server gave before the pause is in the ledger when execute returns
    assert LedgerEntry.objects.filter(key__in=job.keys, outcome="ok").count() == answered
    llm_job_resume(job=job, enqueue=False)
    assert llm_job_execute(job_id=job.pk) == "done"
    assert len(server.chat_requests()) == 200 and max(_sent(server).values()) == 1


def test_the_same_request_twice_in_a_job_and_a_failure_asked_again_keep_the_ledger_rules(server, settings):
    settings.LLM_MAX_ATTEMPTS = 1
    failing = {"on": True}
    server.default = lambda body: (
        Status(500, "down") if failing["on"] and last_user_message(body) == "question 3" else _answer(body)
    )
    requests = _requests(5) + _requests(2)  # questions 0 and 1 twice
    job = llm_job_create(run="dupes", role="llm_filter", requests=requests, concurrency=3, start=False)
    assert llm_job_execute(job_id=job.pk) == "done"
    job.refresh_from_db()
    assert job.status == "done_with_failures" and job.outcome_counts == {"ok": 4, "api_error": 1}
    assert LedgerEntry.objects.filter(key__in=job.keys).count() == 5
    failing["on"] = False
    llm_job_resume(job=job, enqueue=False)
    llm_job_execute(job_id=job.pk)
    entry = LedgerEntry.objects.get(key=job.keys[3])
    assert entry.outcome == "ok" and [h["outcome"] for h in entry.history] == ["api_error"]
    assert _sent(server)["question 3"] == 2 and _sent(server)["question 4"] == 1


def test_writing_in_groups_keeps_an_ok_answer_and_moves_a_replaced_failure_into_history():
    base: dict[str, Any] = dict(
        stage="s",
        role="",
        run="r",
        base_url="u",
        model="m",
        executor="online",
        request={},
        response=None,
        response_text="",
        path="text",
    )
    ledger_write("a" * 64, {**base, "outcome": "ok", "parsed": "first"})
    ledger_write("b" * 64, {**base, "outcome": "api_error", "error": "down"})
    ledger_write_many(
        [
            ("a" * 64, {**base, "outcome": "ok", "parsed": "second"}),
            ("b" * 64, {**base, "outcome": "ok", "parsed": "now"}),
            ("c" * 64, {**base, "outcome": "parse_failed", "error": "bad"}),
            ("c" * 64, {**base, "outcome": "ok", "parsed": "fixed"}),
            ("d" * 64, {**base, "outcome": "ok", "parsed": "new"}),
        ]
    )
    got = {e.key[0]: e for e in LedgerEntry.objects.all()}
    assert got["a"].parsed == "first"  # an ok entry is never replaced
    assert got["b"].parsed == "now" and got["b"].history[0]["error"] == "down"
    assert got["c"].parsed == "fixed" and got["c"].history[0]["outcome"] == "parse_failed"
    assert got["d"].parsed == "new" and LedgerEntry.objects.count() == 4


def test_both_clients_retry_a_429_mask_the_key_and_re_ask_an_unparseable_answer(server):
    server.queue(
        Status(429, "slow down sk-secret-key-1234", {"retry-after-ms": "10"}),
        Reply("not json"),
        Reply(json.dumps({"answer": 0})),
    )
    client = LLMClient(endpoint_get("llm_filter"))
    request = _requests(1, prefix="async")[0]
    recorded = []

    async def ask():
        try:
            return await client.complete(
                request,
                known_unfinished=True,
                asynchronous=True,
                record=lambda key, fields: recorded.append((key, fields)),
            )
        finally:
            await client.aclose()

    result = run_coroutine(ask())
    assert result.ok and result.value == {"answer": 0} and result.attempts == 3
    assert len(recorded) == 1 and recorded[0][1]["outcome"] == "ok"
    assert not LedgerEntry.objects.exists()  # the asynchronous path leaves writing to its caller
    assert [b["messages"][-1]["content"][:24] for b in server.chat_requests()][-1].startswith("Your answer could not")
    assert all(a == "Bearer sk-secret-key-1234" for a in server.authorizations)

    server.queue(Status(401, "bad key sk-secret-key-1234"))
    failed = run_coroutine(_ask_once(client, _requests(1, prefix="again")[0]))
    assert failed.outcome == "api_error" and "sk-secret-key-1234" not in failed.error and "401" in failed.error
    sync = client.complete(_requests(1, prefix="again")[0])  # the blocking client, same loop of attempts
    assert sync.ok and sync.value == {"answer": 0}


async def _ask_once(client: LLMClient, request: LLMRequest):
    try:
        return await client.complete(request, known_unfinished=True, asynchronous=True, record=lambda *a: None)
    finally:
        await client.aclose()


def test_an_asynchronous_call_needs_the_caller_to_have_checked_the_ledger(server):
    client = LLMClient(endpoint_get("llm_filter"))
    with pytest.raises(ValueError):
        client.complete(_requests(1)[0], asynchronous=True, record=lambda *a: None)  # type: ignore[call-overload]


def _backends():
    return [
        pytest.param(InProcessLimits, id="in-process"),
        pytest.param(
            lambda: RedisLimits(REDIS_URL, prefix=f"test:{uuid.uuid4().hex}"),
            id="redis",
            marks=pytest.mark.skipif(not reachable(REDIS_URL), reason="Redis is not reachable"),
        ),
    ]


@pytest.mark.parametrize("make", _backends())
def test_asynchronous_callers_share_slots_rates_and_the_429_pause(make):
    limits = make()
    cap = EndpointLimits(concurrency=3, requests_per_minute=600)  # 10 per second after a burst of 600
    peak = {"now": 0, "max": 0}

    async def one():
        await limits.wait_turn_async("e", cap, tokens=1)
        async with limits.slot_async("e", cap):
            peak["now"] += 1
            peak["max"] = max(peak["max"], peak["now"])
            await asyncio.sleep(0.01)
            peak["now"] -= 1

    async def run():
        try:
            await asyncio.gather(*(one() for _ in range(30)))
            assert limits.in_flight("e") == 0
            limits.pause("e", 0.4)  # a 429 seen by anyone holds everyone back
            started = time.monotonic()
            await limits.wait_turn_async("e", cap, tokens=1)
            return time.monotonic() - started
        finally:
            await limits.aclose()

    waited = run_coroutine(run())
    assert peak["max"] == 3 and waited >= 0.3

    tight = EndpointLimits(concurrency=3, requests_per_minute=60)  # a burst of 60, then 1 per second

    async def rate():
        try:
            for _ in range(60):
                await limits.wait_turn_async("r", tight, tokens=1)
            started = time.monotonic()
            await limits.wait_turn_async("r", tight, tokens=1)
            return time.monotonic() - started
        finally:
            await limits.aclose()

    assert run_coroutine(rate()) >= 0.5


@pytest.mark.parametrize("make", _backends())
def test_hundreds_of_asynchronous_callers_wait_for_the_limits_without_running_out_of_connections(make):
    limits = make()
    cap = EndpointLimits(concurrency=200)
    done = []

    async def one(i):
        await limits.wait_turn_async("many", cap, tokens=1)
        async with limits.slot_async("many", cap):
            await asyncio.sleep(0.02)
            done.append(i)

    async def run():
        try:
            await asyncio.gather(*(one(i) for i in range(400)))
        finally:
            await limits.aclose()

    run_coroutine(run())
    assert sorted(done) == list(range(400)) and limits.in_flight("many") == 0


def test_tokens_and_cost_of_a_key_cover_the_same_attempts_as_its_history():
    from decimal import Decimal

    base: dict[str, Any] = dict(
        stage="s",
        role="",
        run="r",
        base_url="u",
        model="m",
        executor="online",
        request={},
        response=None,
        response_text="",
        path="text",
    )
    key = "e" * 64
    ledger_write(
        key, {**base, "outcome": "truncated", "tokens_in": 100, "tokens_out": 50, "cost_usd": Decimal("0.001")}
    )
    ledger_write(
        key, {**base, "outcome": "ok", "parsed": "x", "tokens_in": 100, "tokens_out": 80, "cost_usd": Decimal("0.002")}
    )
    entry = LedgerEntry.objects.get(key=key)
    assert [h["tokens_in"] for h in entry.history] == [100]
    assert (entry.tokens_in, entry.tokens_out, entry.cost_usd) == (200, 130, Decimal("0.003"))
