"""More run truths, through the scripted OpenAI-compatible server: an ok ledger answer a
run refuses when storing it is asked again; judge requests that end api_error count as
unusable and keep their procedure in the leaderboard's slice; Batch API lines that are not
completions become failure outcomes; a run's job is paused and cancelled through its run;
Retry failed of generation runs (bench_run retry) and plain jobs (the LLM page) asks exactly
the failures, which stay in the ledger entry's history."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from judging.cross_judge_selectors import cross_judge_rankings
from judging.how2score import JUDGE_SCHEMA
from judging.leaderboard_selectors import leaderboard_ranking
from judging.models import JudgeRun, Judgment
from judging.selectors import judge_run_score
from judging.services import judge_run_create, judge_run_execute
from llm.models import LedgerEntry, LLMJob
from llm.request import LLMRequest
from llm.run_lifecycle import run_control
from llm.services import llm_job_create, llm_job_execute, llm_job_resume
from tests.scripted_llm import Raw, Reply, ScriptedLLM, Status, last_user_message
from tests.test_judge_step_links import CRIME_GOAL, _crime_requests, _failure, _judge_with
from tests.test_judging_runs import _generate, _judge_answer, _steps_answer, server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {"type": "object", "properties": {"has": {"type": "boolean"}}, "required": ["has"]}


@pytest.fixture
def quick(settings):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.001
    settings.LLM_BACKOFF_MAX_SECONDS = 0.01
    return settings


def _judge_requests(server: ScriptedLLM) -> list[dict]:
    return [r for r in server.chat_requests() if r.get("response_format")]


# -- an ok answer refused when stored is a failure in the ledger ------------------------


def test_a_judge_answer_from_an_older_ledger_with_an_impossible_link_is_asked_again_by_retry_failed(
    server, quick, monkeypatch
):  # noqa: F811
    # Asked with the unbounded schema (as jobs created before the bounds were), the link to
    # step 28 of a 6-step candidate comes back ok from the client; storing it refuses it.
    monkeypatch.setattr("judging.run_requests.judge_schema", lambda **counts: JUDGE_SCHEMA)
    fixed = {"on": False}
    judge, judgment = _judge_with(server, lambda body: _failure([3] if fixed["on"] else [28]))
    assert judgment.outcome == "parse_failed"
    entry = LedgerEntry.objects.get(key=judgment.provenance["ledger_key"])
    assert entry.outcome == "parse_failed" and "L2_steps" in entry.error and "28" in entry.response_text
    judge.refresh_from_db()
    assert judge.status == "done_with_failures" and judge.llm_job.status == "done_with_failures"

    fixed["on"] = True
    before = len(_crime_requests(server))
    assert run_control(judge, "retry") == 1
    assert judge_run_execute(run_id=judge.pk) == "done"
    judge.refresh_from_db()
    assert len(_crime_requests(server)) - before == 1  # exactly the refused answer, nothing else
    assert judge.status == "done"
    stored = Judgment.objects.get(run=judge, generation__procedure__goal__contains=CRIME_GOAL)
    assert stored.outcome == "ok" and stored.critical_failures[0]["L2_steps"] == [3]
    history = LedgerEntry.objects.get(key=entry.key).history
    assert [h["outcome"] for h in history] == ["parse_failed"] and "28" in history[0]["response_text"]


# -- judge requests that end api_error: unusable, and their procedure stays in the slice --


def _judge_all_but_crime(server, judge="how2judge", models=("model-a", "model-b")):  # noqa: F811
    """Judge runs of ``judge`` for each model; every judge request for the Crime & Law
    procedure ends api_error (a 404: not retried), the "reticello" one parse_failed."""
    server.default = lambda body: (
        _steps_answer(body)
        if not body.get("response_format")
        else Status(404, "no judge for this one")
        if CRIME_GOAL in body["messages"][0]["content"]
        else _judge_answer(body)
    )
    runs = []
    for model in models:
        generation_run = _generate(name=model)
        run = judge_run_create(name=f"{judge}-{model}", generation_run=generation_run, judge=judge, start=False)
        judge_run_execute(run_id=run.pk)
        runs.append(JudgeRun.objects.get(pk=run.pk))
    return runs


def test_api_error_judge_requests_count_as_unusable_and_keep_their_procedure_in_the_slice(
    server, quick, researcher_client
):  # noqa: F811
    runs = _judge_all_but_crime(server)
    assert not Judgment.objects.filter(judge="how2judge", generation__procedure__goal__contains=CRIME_GOAL).exists()
    board = leaderboard_ranking("how2judge", basis="all")
    assert board["n_items"] == 17  # the procedure no judge request got through for is still an item
    for row in board["rows"]:
        assert (row["n_judged"], row["n_unusable"], row["n_items_judged"], row["n_items"]) == (15, 2, 15, 17)
        assert row["complete"] is False and row["rank"] is None  # 88 % coverage: below the threshold
    score = judge_run_score(runs[0])  # the run page says the same
    assert (score["n_judged"], score["n_unusable"], score["n_items"]) == (15, 2, 17)
    assert score["outcomes"] == {"ok": 15, "parse_failed": 1, "api_error": 1}

    api = researcher_client.get("/api/leaderboard", {"judge": "how2judge", "basis": "all"}).json()
    assert api["n_items"] == 17
    assert [(r["n_unusable"], r["n_items"], r["coverage"]) for r in api["rows"]] == [(2, 17, 15 / 17)] * 2
    page = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge", "basis": "all"}).content.decode()
    assert "(15/17)" in page and "should have been judged on <strong>17</strong> procedures" in page


def test_the_cross_judge_page_counts_api_errors_as_unusable(server, quick, researcher_client):  # noqa: F811
    _judge_all_but_crime(server, judge="how2judge", models=("model-a",))
    [generation_run] = [r.generation_run for r in JudgeRun.objects.all()]
    server.default = lambda body: (
        _steps_answer(body)
        if not body.get("response_format")
        else Reply(json.dumps({"reasoning": "fine", "critical_failures": []}))
    )
    # Another judge model: its own requests (the same model would be answered from the ledger).
    other = judge_run_create(name="other-a", generation_run=generation_run, judge="other", model="m2", start=False)
    judge_run_execute(run_id=other.pk)
    rankings = cross_judge_rankings(["how2judge", "other"])
    first, second = rankings["estimates"]["how2judge"]["model-a"], rankings["estimates"]["other"]["model-a"]
    assert (first["n_judged"], first["n_unusable"], first["n_items"]) == (15, 2, 17)
    assert (second["n_judged"], second["n_unusable"], second["n_items"]) == (17, 0, 17)
    page = researcher_client.get(reverse("cross_judge"), {"judge": ["how2judge", "other"]}).content.decode()
    assert "15 judged · 2 unusable · coverage 15 / 17" in page


# -- Batch API lines that are not completions ---------------------------------------------


def _batch_job(server: ScriptedLLM, settings, contents: list[str]) -> LLMJob:
    roles = dict(settings.LLM_ROLES)
    roles["llm_filter"] = {
        "base_url": server.base_url,
        "api_key": "k",
        "model": "m",
        "temperature": None,
        "max_tokens": None,
    }
    settings.LLM_ROLES = roles
    requests = [
        LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": c}], schema=SCHEMA) for c in contents
    ]
    return llm_job_create(run="batch-faults", role="llm_filter", requests=requests, executor="batch", start=False)


def _until_done(job: LLMJob) -> str:
    outcome = llm_job_execute(job_id=job.pk)
    for _ in range(5):
        if not outcome.startswith("waiting"):
            break
        outcome = llm_job_execute(job_id=job.pk)
    return outcome


def test_batch_lines_that_are_not_completions_become_failures_with_their_reason_and_resume_asks_them(settings):
    settings.LLM_BATCH_MAX_RESUBMITS = 0
    bad_usage = {
        "choices": [{"message": {"content": '{"has": true}'}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": "many", "completion_tokens": None},
    }
    faults = {
        "null choice": Raw(json.dumps({"choices": [None]})),
        "a list": Raw("[]"),
        "not json": Raw("<html><body>502 Bad Gateway</body></html>"),
        "bad usage": Raw(json.dumps(bad_usage)),
    }
    broken = {"on": True}
    with ScriptedLLM() as server:
        server.default = lambda body: (
            faults[last_user_message(body)]
            if broken["on"] and last_user_message(body) in faults
            else Reply('{"has": false}')
        )
        job = _batch_job(server, settings, [*faults, "fine"])
        assert _until_done(job) == "done"  # the job finishes instead of failing on a line
        job.refresh_from_db()
        assert job.status == "done_with_failures" and job.outcome_counts == {"ok": 2, "api_error": 3}
        entries = {e.request["messages"][0]["content"]: e for e in LedgerEntry.objects.filter(key__in=job.keys)}
        assert "malformed response" in entries["null choice"].error and "choices[0]" in entries["null choice"].error
        assert "JSON list" in entries["a list"].error
        assert "not JSON" in entries["not json"].error
        assert entries["bad usage"].outcome == "ok" and entries["bad usage"].tokens_in == 0
        assert entries["bad usage"].parsed == {"has": True}

        broken["on"] = False  # resuming asks exactly the three failures in a new batch
        sent_before = len(server.files)
        llm_job_resume(job=job, enqueue=False)
        assert _until_done(job) == "done"
        job.refresh_from_db()
        assert job.status == "done" and job.outcome_counts == {"ok": 5}
        new_inputs = [
            f
            for fid, f in list(server.files.items())[sent_before:]
            if f.startswith(b'{"custom_id"') and b'"method"' in f
        ]
        assert [len(f.decode().splitlines()) for f in new_inputs] == [3]
        assert [h["outcome"] for h in LedgerEntry.objects.get(key=entries["not json"].key).history] == ["api_error"]


def test_a_batch_line_that_is_not_json_is_resubmitted_while_resubmissions_remain(settings):
    settings.LLM_BATCH_MAX_RESUBMITS = 1
    answers = {"first": 0}

    def answer(body):
        answers["first"] += 1
        return Raw("{not json") if answers["first"] == 1 else Reply('{"has": true}')

    with ScriptedLLM() as server:
        server.default = answer
        job = _batch_job(server, settings, ["only"])
        assert _until_done(job) == "done"
    job.refresh_from_db()
    assert job.status == "done" and job.outcome_counts == {"ok": 1} and job.batches.count() == 2


# -- a run's job is paused and cancelled through its run -----------------------------------


def test_pausing_and_cancelling_a_runs_job_from_the_llm_page_go_through_the_run(server, admin_client_):  # noqa: F811
    run = _generate()
    judge = judge_run_create(name="j", generation_run=run, judge="how2judge", start=False)
    job_url = lambda action: reverse("llm_job_action", args=[judge.llm_job_id, action])  # noqa: E731
    response = admin_client_.post(job_url("pause"), follow=True)
    assert "through its judge run j" in response.content.decode()
    judge.refresh_from_db()
    assert judge.llm_job_id is not None
    assert judge.status == "paused" and LLMJob.objects.get(pk=judge.llm_job_id).status == "paused"

    admin_client_.post(job_url("cancel"), {"confirm": "yes"})
    judge.refresh_from_db()
    assert judge.llm_job_id is not None
    assert judge.status == "cancelled" and LLMJob.objects.get(pk=judge.llm_job_id).status == "cancelled"
    assert judge_run_execute(run_id=judge.pk) == "not active (cancelled)"  # nothing is left half-alive


def test_pausing_and_cancelling_a_mining_runs_batch_job_from_the_llm_page_go_through_the_run(settings, admin_client_):
    from mining.run_services import mining_run_create, mining_run_resume
    from mining.runner import mining_run_execute
    from tests.scripted_miner import document_text, scripted_miner_server
    from tests.test_mining_runs import config, make_corpus, point_stages_at

    server, _ = scripted_miner_server(batch_polls_until_done=3)
    with server:
        point_stages_at(settings, server)
        corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Exercise {i}")) for i in range(2)])
        run = mining_run_create(
            config_text=config(executor="batch"), source="run.yaml", corpus_name=corpus.name, start=False
        )
        assert mining_run_execute(run_id=run.pk).startswith("waiting")  # a batch is out
        run.refresh_from_db()
        [job_id] = run.batch_job_ids
        response = admin_client_.post(reverse("llm_job_action", args=[job_id, "pause"]), follow=True)
        assert f"through its mining run {run.name}" in response.content.decode()
        run.refresh_from_db()
        assert run.status == "paused"
        mining_run_resume(run=run, start=False)  # the run's Resume continues it: the job was left to the run
        assert mining_run_execute(run_id=run.pk).startswith("waiting")

        admin_client_.post(reverse("llm_job_action", args=[job_id, "cancel"]), {"confirm": "yes"})
        run.refresh_from_db()
        assert run.status == "cancelled" and LLMJob.objects.get(pk=job_id).status == "cancelled"
        assert mining_run_execute(run_id=run.pk) == "not active (cancelled)"


def test_every_kind_of_run_registers_how_its_jobs_are_paused_and_cancelled():
    from llm.run_lifecycle import _OWNERS

    prefixes = {owner.prefix for owner in _OWNERS}
    assert prefixes >= {
        "judge-run:",
        "generation-run:",
        "components-run:",
        "goalstep-evaluation:",
        "coscript:",
        "mining-run:",
    }
    assert all(callable(owner.pause) and callable(owner.cancel) for owner in _OWNERS)


# -- Retry failed of generation runs and plain jobs; the ledger keeps the failures ------------


def test_a_generation_run_with_failures_is_retried_by_bench_run_retry_exactly_on_them(server, quick, capsys):  # noqa: F811
    from judging.services import generation_run_create, generation_run_execute, language_model_register

    quick.LLM_TRUNCATION_RETRIES = 0
    broken = {"on": True}

    def answer(body):
        text = last_user_message(body)
        if broken["on"] and "Sell your share" in text:
            return Status(404, "model not loaded")  # api_error: no generation stored
        if broken["on"] and "reticello" in text:
            return Reply("1. Start", finish_reason="length")  # truncated: stored, unusable
        return _steps_answer(body)

    server.default = answer
    model = language_model_register(name="flaky")
    run = generation_run_create(name="flaky-bench", language_model=model, start=False)
    generation_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done_with_failures"
    assert (
        run.generations.filter(outcome="ok").count() == 15 and run.generations.filter(outcome="truncated").count() == 1
    )
    call_command("bench_run", "status", "flaky-bench")
    status = json.loads(capsys.readouterr().out)
    assert status["status"] == "done_with_failures" and status["outcomes"]["api_error"] == 1
    assert status["outcomes"]["truncated"] == 1

    broken["on"] = False
    before = len(server.chat_requests())
    call_command("bench_run", "retry", "flaky-bench", "--wait")
    out = capsys.readouterr().out
    assert out.startswith("flaky-bench: 2 failed request(s) to ask again")
    resent = [last_user_message(b) for b in server.chat_requests()[before:]]
    assert len(resent) == 2 and any("Sell your share" in t for t in resent) and any("reticello" in t for t in resent)
    run.refresh_from_db()
    assert run.status == "done" and run.generations.filter(outcome="ok").count() == 17
    assert json.loads(out[out.index("{") :])["status"] == "done"


@pytest.fixture
def plain_job_with_a_failure(settings):
    settings.LLM_MAX_ATTEMPTS = 1
    with ScriptedLLM() as scripted:
        broken = {"on": True}
        scripted.default = lambda body: (
            Status(500, "down for maintenance")
            if broken["on"] and last_user_message(body) == "broken"
            else Reply('{"has": true}')
        )
        roles = dict(settings.LLM_ROLES)
        roles["llm_filter"] = {
            "base_url": scripted.base_url,
            "api_key": "k",
            "model": "m",
            "temperature": None,
            "max_tokens": None,
        }
        settings.LLM_ROLES = roles
        requests = [
            LLMRequest(stage="llm_filter", messages=[{"role": "user", "content": text}], schema=SCHEMA)
            for text in ("one", "two", "broken")
        ]
        job = llm_job_create(run="plain-filter", role="llm_filter", requests=requests, start=False)
        llm_job_execute(job_id=job.pk)
        yield job, scripted, broken


def test_retry_failed_of_a_plain_job_on_the_llm_page_asks_exactly_its_failure(admin_client_, plain_job_with_a_failure):
    job, scripted, broken = plain_job_with_a_failure
    job.refresh_from_db()
    assert job.status == "done_with_failures"
    page = admin_client_.get(reverse("llm_overview")).content.decode()
    assert reverse("llm_job_action", args=[job.pk, "retry"]) in page  # the button is offered

    broken["on"] = False
    before = len(scripted.chat_requests())
    response = admin_client_.post(reverse("llm_job_action", args=[job.pk, "retry"]), follow=True)
    assert f"Job {job.pk}: 1 request without an ok answer will be asked again." in response.content.decode()
    assert LLMJob.objects.get(pk=job.pk).status == "pending"
    assert llm_job_execute(job_id=job.pk) == "done"
    assert [last_user_message(b) for b in scripted.chat_requests()[before:]] == ["broken"]
    job.refresh_from_db()
    assert job.status == "done" and job.outcome_counts == {"ok": 3}


def test_the_ledger_entry_page_shows_the_failed_attempts_before_the_answer(admin_client_, plain_job_with_a_failure):
    job, scripted, broken = plain_job_with_a_failure
    admin_client_.post(reverse("llm_job_action", args=[job.pk, "retry"]))
    llm_job_execute(job_id=job.pk)  # still down: a second failed attempt
    broken["on"] = False
    admin_client_.post(reverse("llm_job_action", args=[job.pk, "retry"]))
    llm_job_execute(job_id=job.pk)
    entry = LedgerEntry.objects.get(key=job.keys[2])
    assert entry.outcome == "ok" and [h["outcome"] for h in entry.history] == ["api_error", "api_error"]
    html = admin_client_.get(reverse("llm_ledger_entry", args=[entry.pk])).content.decode()
    section = html[html.index('id="ledger-history"') :]
    assert section.count("<td>api_error</td>") == 2 and section.count("down for maintenance") == 2
    assert "plain-filter" in section and "None: this is the first answer" not in section
