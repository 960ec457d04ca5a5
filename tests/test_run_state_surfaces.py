"""Every kind of run tells the truth about its requests where people and programs read it:
a mining run, a goal-step evaluation and a CoScript run against the scripted server with
some requests failing end ``done_with_failures`` (a CoScript run pauses at the phase) and
say so on their pages, in their commands' JSON (keys ``status`` and ``outcomes``) and in
the API; once the endpoint recovers, *Retry failed* from the page or the command asks
exactly the failed requests again and the run ends ``done``."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from coscript.models import CoScriptRun
from coscript.phase_services import coscript_run_execute
from coscript.run_services import coscript_run_create
from goalstep.services import task_evaluation_create, task_evaluation_execute
from judging.services import language_model_register
from llm.ledger_totals import ledger_totals_verify
from llm.models import LedgerEntry
from mining.models import MiningRun
from mining.run_services import mining_run_create
from mining.runner import mining_run_execute
from tests import coscript_world
from tests.scripted_llm import Reply, Status, last_user_message
from tests.scripted_miner import MARKER, document_text, stage_of
from tests.test_goalstep_evaluation import ANSWERS, server, task_set  # noqa: F401  (fixtures)
from tests.test_mining_runs import config, make_corpus, miner  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

VIA = ["page", "command"]


def _one_attempt(settings) -> None:
    """A failed request stays failed within a run: one attempt, short back-offs."""
    settings.LLM_MAX_ATTEMPTS = 1
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01


def _command_json(capsys, *args) -> dict:
    capsys.readouterr()
    call_command(*args)
    out = capsys.readouterr().out
    return json.loads(out[out.index("{") :])


def _retry_failed(via: str, server, failing: dict, *, client, url: str, execute, command: tuple) -> list[dict]:
    """The endpoint recovers; *Retry failed* from the page (then the worker executes the run)
    or from the command. Returns the requests the server received meanwhile."""
    failing["on"] = False
    before = len(server.chat_requests())
    if via == "page":
        assert client.post(url).status_code == 302
        execute()
    else:
        call_command(*command)
    return server.chat_requests()[before:]


# -- mining ---------------------------------------------------------------------------


def _doc(body) -> str:
    found = MARKER.search(body["messages"][0]["content"])
    return found.group(1) if found else "?"


@pytest.mark.parametrize("via", VIA)
def test_a_mining_run_with_failed_documents_says_so_and_retry_failed_asks_only_them(
    miner, admin_client_, settings, capsys, via
):
    server, answers = miner
    _one_attempt(settings)
    failing = {"on": True}
    broken = {"d2", "d4"}
    server.default = lambda body: (
        Status(500, "upstream down")
        if failing["on"] and stage_of(body) == "llm_filter" and _doc(body) in broken
        else answers(body)
    )
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(6)])
    run = mining_run_create(
        config_text=config("flaky-mine", failure_retries=0), source="run.yaml", corpus_name=corpus.name, start=False
    )
    mining_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done_with_failures"

    page = admin_client_.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
    assert f'id="mining-run-{run.pk}-state" data-status="done_with_failures"' in page
    assert "22 ok · 2 api_error" in page and "upstream down" in page and "Retry failed (2)" in page
    listing = admin_client_.get(reverse("mining_run_list")).content.decode()
    assert "done_with_failures" in listing and '2 failed</span> <span class="muted small">(2 api_error)' in listing
    status = _command_json(capsys, "mine_run", "--status", "flaky-mine")
    assert list(status)[1:3] == ["status", "outcomes"]
    assert status["status"] == "done_with_failures" and status["outcomes"]["api_error"] == 2
    assert status["outcomes"]["ok"] == 22 and status["totals"]["failed"] == 2

    sent = _retry_failed(
        via,
        server,
        failing,
        client=admin_client_,
        url=reverse("mining_run_action", args=[run.pk, "retry-failures"]),
        execute=lambda: mining_run_execute(run_id=run.pk),
        command=("mine_run", "--retry", "flaky-mine", "--wait"),
    )
    asked = [(stage_of(body), _doc(body)) for body in sent]
    # the two failed calls again, then the later stages of those two documents, nothing else
    assert sorted(asked) == sorted(
        (stage, doc) for doc in broken for stage in ("llm_filter", "rewrite", "extract_resources", "final_validation")
    )
    run.refresh_from_db()
    assert run.status == "done"
    status = _command_json(capsys, "mine_run", "--status", "flaky-mine")
    assert status["status"] == "done" and status["outcomes"]["api_error"] == 0 and status["outcomes"]["ok"] == 30
    page = admin_client_.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
    assert 'data-status="done"' in page and "Retry failed" not in page


def test_a_mining_run_whose_endpoint_is_down_pauses_with_the_breakers_banner_on_its_page(
    miner, admin_client_, settings
):
    server, _ = miner
    _one_attempt(settings)
    settings.LLM_BREAKER_CONSECUTIVE = 3
    server.default = lambda body: Status(503, "service unavailable")
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(8)])
    run = mining_run_create(
        config_text=config("down-mine", failure_retries=0, concurrency=1),
        source="run.yaml",
        corpus_name=corpus.name,
        start=False,
    )
    mining_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "paused" and run.breaker["reason"] == "3 failed attempts in a row"
    page = admin_client_.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
    assert f'id="mining-run-{run.pk}-breaker"' in page and "Paused by the circuit breaker" in page
    assert server.base_url in page and "service unavailable" in page


def test_mining_run_states_are_in_the_api(miner, researcher_client, settings):
    server, answers = miner
    _one_attempt(settings)
    server.default = lambda body: Status(500, "down") if _doc(body) == "d1" else answers(body)
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(3)])
    run = mining_run_create(
        config_text=config("api-mine", failure_retries=0), source="run.yaml", corpus_name=corpus.name, start=False
    )
    mining_run_execute(run_id=run.pk)
    listing = researcher_client.get("/api/mining/runs/").json()
    row = listing["results"][0]
    assert row["name"] == "api-mine" and row["status"] == "done_with_failures"
    assert row["outcomes"]["api_error"] == 1 and row["outcomes"]["ok"] == 10
    detail = researcher_client.get(f"/api/mining/runs/{run.pk}/").json()
    assert detail["status"] == "done_with_failures" and detail["outcomes"] == row["outcomes"]
    assert detail["n_failed"] == 1 and "down" in detail["top_errors"][0]["error"]
    assert researcher_client.get("/api/mining/runs/999999/").status_code == 404


# -- goal-step evaluations ------------------------------------------------------------

FAILING_ITEMS = ("Keep a cat calm", "Plant tulips")


@pytest.mark.parametrize("via", VIA)
def test_a_goalstep_evaluation_with_failed_requests_says_so_and_retry_failed_asks_only_them(
    task_set, server, admin_client_, settings, capsys, via
):
    _one_attempt(settings)
    failing = {"on": True}

    def answer(body):
        text = last_user_message(body)
        if failing["on"] and any(item in text for item in FAILING_ITEMS):
            return Status(500, "upstream down")
        return Reply(ANSWERS[next(p for p in ANSWERS if p in text)])

    server.default = answer
    model = language_model_register(name="scripted-model")
    evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
    task_evaluation_execute(evaluation_id=evaluation.pk)
    evaluation.refresh_from_db()
    assert evaluation.status == "done_with_failures"

    page = admin_client_.get(reverse("goalstep_leaderboard", args=["step_inference"])).content.decode()
    assert f'id="evaluation-{evaluation.pk}-state" data-status="done_with_failures"' in page
    assert "2 ok · 2 api_error" in page and "Retry failed (2)" in page
    status = _command_json(capsys, "goalstep_evaluate", "--status", str(evaluation.pk))
    assert list(status)[:2] == ["status", "outcomes"]
    assert status["status"] == "done_with_failures" and status["outcomes"]["api_error"] == 2
    assert status["outcomes"]["ok"] == 2 and "upstream down" in status["top_errors"][0]["error"]

    sent = _retry_failed(
        via,
        server,
        failing,
        client=admin_client_,
        url=reverse("goalstep_evaluation_action", args=[evaluation.pk, "retry"]),
        execute=lambda: task_evaluation_execute(evaluation_id=evaluation.pk),
        command=("goalstep_evaluate", "--retry", str(evaluation.pk)),
    )
    asked = [last_user_message(body) for body in sent]
    assert sorted(next(item for item in FAILING_ITEMS if item in text) for text in asked) == sorted(FAILING_ITEMS)
    evaluation.refresh_from_db()
    assert evaluation.status == "done" and evaluation.predictions.count() == 4
    status = _command_json(capsys, "goalstep_evaluate", "--status", str(evaluation.pk))
    assert status["status"] == "done" and status["outcomes"]["ok"] == 4 and status["outcomes"]["api_error"] == 0
    page = admin_client_.get(reverse("goalstep_leaderboard", args=["step_inference"])).content.decode()
    assert 'data-status="done"' in page and "Retry failed" not in page


def test_goalstep_evaluation_actions_are_for_admins_and_refuse_unknown_ones(
    task_set, server, admin_client_, researcher_client
):
    model = language_model_register(name="scripted-model")
    evaluation = task_evaluation_create(task_set=task_set, language_model=model, start=False)
    task_evaluation_execute(evaluation_id=evaluation.pk)
    url = reverse("goalstep_evaluation_action", args=[evaluation.pk, "retry"])
    assert researcher_client.post(url).status_code == 403
    assert admin_client_.get(url).status_code == 405
    bad = admin_client_.post(reverse("goalstep_evaluation_action", args=[evaluation.pk, "explode"]))
    assert bad.status_code == 400 and "action" in bad.content.decode()
    assert admin_client_.post(reverse("goalstep_evaluation_action", args=[999999, "retry"])).status_code == 404
    # a finished evaluation without failures has nothing to retry or resume: said, not a 500
    response = admin_client_.post(reverse("goalstep_evaluation_action", args=[evaluation.pk, "resume"]), follow=True)
    assert response.status_code == 200 and "cannot be resumed" in response.content.decode()


# -- CoScript -------------------------------------------------------------------------


@pytest.fixture
def coscript_server(settings):
    with coscript_world.scripted_server(settings) as scripted:
        yield scripted


@pytest.mark.parametrize("via", VIA)
def test_a_coscript_run_with_failed_requests_pauses_says_so_and_retry_failed_asks_only_them(
    db, coscript_server, admin_client_, researcher_client, settings, capsys, via
):
    coscript_world.make_procedures()
    _one_attempt(settings)
    failing = {"on": True}
    coscript_server.default = lambda body: (
        Status(500, "upstream down")
        if failing["on"] and "Vanilla" in last_user_message(body)
        else coscript_world.answer(body)
    )
    model = language_model_register(name="scripted-model")
    run = coscript_run_create(name="flaky-plan", language_model=model, split="bench", start=False, screen=False)
    coscript_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "paused" and run.phase == "scripts"

    page = admin_client_.get(reverse("coscript_run_detail", args=[run.pk])).content.decode()
    assert f'id="coscript-run-{run.pk}-state" data-status="paused"' in page
    assert "28 ok · 2 api_error" in page and "Retry failed (2)" in page and 'id="retry-failed"' in page
    listing = admin_client_.get(reverse("coscript_runs")).content.decode()
    assert "2 failed" in listing
    status = _command_json(capsys, "coscript_run", "status", "flaky-plan")
    assert list(status)[1:3] == ["status", "outcomes"]
    assert status["status"] == "paused" and status["outcomes"]["api_error"] == 2 and status["outcomes"]["ok"] == 28
    api = researcher_client.get(f"/api/coscript/runs/{run.pk}/").json()
    assert api["status"] == "paused" and api["outcomes"]["api_error"] == 2 and api["n_failed"] == 2
    assert researcher_client.get("/api/coscript/runs/").json()["results"][0]["outcomes"]["api_error"] == 2

    sent = _retry_failed(
        via,
        coscript_server,
        failing,
        client=admin_client_,
        url=reverse("coscript_run_action", args=[run.pk, "retry-failed"]),
        execute=lambda: coscript_run_execute(run_id=run.pk),
        command=("coscript_run", "retry", "flaky-plan", "--wait"),
    )
    asked = [last_user_message(body) for body in sent]
    assert len(asked) == 2 and all("vanilla" in text.lower() for text in asked)
    run = CoScriptRun.objects.get(pk=run.pk)
    assert run.status == "done"
    status = _command_json(capsys, "coscript_run", "status", "flaky-plan")
    assert status["status"] == "done" and status["outcomes"]["api_error"] == 0 and status["outcomes"]["ok"] == 30
    page = admin_client_.get(reverse("coscript_run_detail", args=[run.pk])).content.decode()
    assert 'data-status="done"' in page and "Retry failed" not in page


# -- --wait: the run's true status from the database, and a non-zero exit unless done -----


def test_mine_run_wait_says_done_with_failures_and_its_failures_and_exits_non_zero(
    miner, admin_client_, settings, capsys, tmp_path
):
    server, answers = miner
    _one_attempt(settings)
    server.default = lambda body: (
        Status(500, "upstream down") if stage_of(body) == "llm_filter" and _doc(body) in {"d2", "d4"} else answers(body)
    )
    corpus = make_corpus([(f"d{i}", "health", document_text(f"d{i}", f"Prepare item {i}")) for i in range(6)])
    path = tmp_path / "run.yaml"
    path.write_text(config("wait-mine", failure_retries=0))
    with pytest.raises(CommandError, match="mining run 'wait-mine' ended done_with_failures, not done"):
        call_command("mine_run", "--corpus", corpus.name, "--config", str(path), "--wait")
    out = capsys.readouterr().out
    assert "finished: done_with_failures; 2 of 24 requests failed (api_error 2); 2 documents failed\n" in out
    assert "finished: done\n" not in out

    # Its cost: the scripted model has no price, so the total and every stage row are unknown
    # (a partial sum is never shown: one entry priced changes nothing).
    run = MiningRun.objects.get(name="wait-mine")
    entry = LedgerEntry.objects.filter(run=run.ledger_run).first()
    assert entry is not None
    LedgerEntry.objects.filter(pk=entry.pk).update(cost_usd=1)
    # priced by hand, not by a ledger write: the run's kept totals are reconciled as
    # verify_run_counters does (llm/ledger_totals.py)
    assert len(ledger_totals_verify(run.ledger_run)) == 1
    page = admin_client_.get(reverse("mining_run_detail", args=[run.pk])).content.decode()
    assert 'id="cost">unknown <span class="muted small">(23 requests without a price)</span>' in page
    stage_table = page.split('id="stage-costs"')[1].split("</table>")[0]
    assert "0.0000" not in stage_table and "1.0000" not in stage_table  # unknown, not a partial sum
    status = _command_json(capsys, "mine_run", "--status", "wait-mine")
    assert status["totals"]["cost_usd"] is None and status["totals"]["requests_without_price"] == 23


def test_coscript_run_wait_says_paused_with_its_reason_and_exits_non_zero_and_its_cost_is_unknown(
    db, coscript_server, admin_client_, researcher_client, settings, capsys
):
    coscript_world.make_procedures()
    _one_attempt(settings)
    coscript_server.default = lambda body: (
        Status(500, "upstream down") if "Vanilla" in last_user_message(body) else coscript_world.answer(body)
    )
    language_model_register(name="scripted-model")
    args = ("start", "--name", "wait-plan", "--model", "scripted-model", "--split", "bench", "--no-screen", "--wait")
    with pytest.raises(CommandError, match=r"CoScript run 'wait-plan' ended paused, not done \(.+\)"):
        call_command("coscript_run", *args)
    out = capsys.readouterr().out
    run = CoScriptRun.objects.get(name="wait-plan")
    assert run.status == "paused" and run.pause_reason and not run.error
    line = next(line for line in out.splitlines() if line.startswith("finished:"))
    assert line == f"finished: paused; 2 of 30 requests failed (api_error 2); reason: {run.pause_reason}"

    # The scripted model has no price: what the run spent is unknown, never 0.
    page = admin_client_.get(reverse("coscript_run_detail", args=[run.pk])).content.decode()
    assert '<span id="run-cost"><span class="cost-unknown">unknown</span>' in page
    assert "30 requests without a price" in page and "0.0000" not in page
    assert 'id="phase-scripts-cost"><span class="cost-unknown">unknown</span>' in page
    api = researcher_client.get(f"/api/coscript/runs/{run.pk}/").json()
    scripts = next(job for job in api["jobs"] if job["phase"] == "scripts")
    assert scripts["cost_usd"] is None and scripts["requests_without_price"] == scripts["n_done"] > 0
    status = _command_json(capsys, "coscript_run", "status", "wait-plan")
    assert status["jobs"]["candidate scripts"]["cost_usd"] is None
    assert status["jobs"]["candidate scripts"]["requests_without_price"] == scripts["requests_without_price"]
