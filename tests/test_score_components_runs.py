"""The extract_components stage against the scripted server, and SCORE on generation runs
and the leaderboard: LLM components stored and reused, malformed answers stored as
parse_failed and replaced by the rule-based components, the offline fallback."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from judging.components import COMPONENTS_SCHEMA, components_schema, rule_based_components
from judging.constants import SCORE_MAX
from judging.leaderboard_selectors import leaderboard
from judging.models import ComponentExtraction, ComponentsRun, Generation, Judgment
from judging.prompts import prompt_load
from judging.score_metric import score_steps
from judging.score_selectors import RULE_EXTRACTOR, generation_run_score, generation_scores
from judging.score_services import components_run_create, components_run_execute, llm_extractor_name, steps_hash
from judging.services import generation_run_create, generation_run_execute, language_model_register
from llm.models import LedgerEntry, LLMJob
from llm.run_lifecycle import run_control
from tests.scripted_llm import Reply, last_user_message

# The generation run fixture's scripted server (generate and how2score_judge roles).
from tests.test_judging_runs import server  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _numbered_steps(text: str) -> list[str]:
    return re.findall(r"^\d+\. (.*)$", text.split("Steps:\n", 1)[1], flags=re.MULTILINE)


def _components_answer(body):
    """An extractor that reads every step as the action "do" on nothing: a reference and a
    generation with the same number of steps then agree completely."""
    steps = _numbered_steps(last_user_message(body))
    if any("reticello" in step.lower() for step in steps):  # one list gets a wrong count
        return Reply(json.dumps({"steps": []}))
    return Reply(json.dumps({"steps": [{"action": "do", "objects": [], "parameters": []} for _ in steps]}))


@pytest.fixture
def components_server(server, settings):
    """The generation server of tests/test_judging_runs.py, also answering extract_components."""
    settings.LLM_PARSE_REASKS = 0
    roles = dict(settings.LLM_ROLES)
    roles["extract_components"] = dict(roles["generate"])
    settings.LLM_ROLES = roles
    generate = server.default
    server.default = lambda body: _components_answer(body) if body.get("response_format") else generate(body)
    return server


@pytest.fixture
def generation_run(components_server):
    model = language_model_register(name="qwen3-8b")
    run = generation_run_create(name="qwen3-8b-bench", language_model=model, start=False)
    assert generation_run_execute(run_id=run.pk) == "done"
    return run


def _extract(generation_run, name="components-1"):
    run = components_run_create(name=name, generation_run=generation_run, start=False)
    assert components_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    return run


def test_components_requests_use_the_prompt_file_and_a_strict_schema(components_server, generation_run):
    sent_before = len(components_server.chat_requests())
    run = _extract(generation_run)
    requests = components_server.chat_requests()[sent_before:]
    assert requests and len(requests) == run.llm_job.n_total
    body = requests[0]
    n_steps = len(_numbered_steps(last_user_message(body)))
    schema = components_schema(n_steps)  # exactly one triple per step
    assert body["response_format"]["json_schema"] == {"name": "extract_components", "schema": schema, "strict": True}
    assert schema["properties"]["steps"]["minItems"] == schema["properties"]["steps"]["maxItems"] == n_steps
    assert schema["properties"]["steps"]["items"] == COMPONENTS_SCHEMA["properties"]["steps"]["items"]
    assert body["temperature"] == 0
    prompt = prompt_load("extract_components.txt", kind="extract_components")
    assert run.prompt_hash == prompt.sha256
    assert run.extractor == llm_extractor_name("m", prompt.sha256)
    # Every request is one step list, numbered "1. ..." as in the judge prompt.
    assert _numbered_steps(last_user_message(body))[0]


def test_components_are_stored_once_per_step_list(components_server, generation_run):
    run = _extract(generation_run)
    generations = list(generation_run.generations.select_related("procedure"))
    expected = {steps_hash(s) for g in generations for s in (g.procedure.steps, g.predicted_steps) if s}
    assert set(run.steps_hashes) == expected
    stored = ComponentExtraction.objects.filter(extractor=run.extractor)
    assert stored.count() == len(expected)
    ok = stored.filter(outcome="ok").first()
    assert ok is not None
    assert ok.components == [{"action": "do", "objects": [], "parameters": []}] * len(ok.steps)


def test_a_second_run_reuses_stored_components_and_sends_nothing(components_server, generation_run):
    _answer_every_list(components_server)
    _extract(generation_run)
    sent = len(components_server.chat_requests())
    again = _extract(generation_run, name="components-2")
    assert again.llm_job.n_total == 0 and again.steps_hashes == []
    assert len(components_server.chat_requests()) == sent
    assert again.status == "done"


def test_a_wrong_count_is_stored_as_parse_failed_and_falls_back_to_rules(components_server, generation_run):
    run = _extract(generation_run)
    failed = ComponentExtraction.objects.get(extractor=run.extractor, outcome="parse_failed")
    assert failed.components == []
    assert "steps" in failed.error and "too short" in failed.error  # the bounded schema's reason
    assert "reticello" in " ".join(failed.steps).lower()
    summary = generation_run_score(generation_run)
    assert summary["extractor"] == run.extractor
    assert summary["n_rule_based"] == 1


def test_run_score_uses_llm_components_after_extraction_and_rules_before(components_server, generation_run):
    before = generation_run_score(generation_run)
    assert before["extractor"] == RULE_EXTRACTOR
    assert before["n_scored"] == 17 and before["n_rule_based"] == 17
    # The rule-based SCORE, computed here from the rule directly.
    generations = list(generation_run.generations.select_related("procedure"))
    rule_scores = [
        score_steps(
            [rule_based_components(s) for s in g.predicted_steps], [rule_based_components(s) for s in g.procedure.steps]
        ).score
        for g in generations
    ]
    assert before["score"] == pytest.approx(sum(rule_scores) / len(rule_scores))

    _extract(generation_run)
    after = generation_run_score(generation_run)
    # Every generation has its reference's step count, and the scripted extractor reads every
    # step as the same empty "do": full agreement except the one parse_failed pair.
    reticello = [g for g in generations if any("reticello" in s.lower() for s in g.procedure.steps + g.predicted_steps)]
    assert len(reticello) == 1
    fallback = rule_scores[generations.index(reticello[0])]
    assert after["score"] == pytest.approx((16 * SCORE_MAX + fallback) / 17)
    assert after["step_m"] == 1.0


def test_scores_skip_generations_without_a_usable_answer(components_server, generation_run):
    failed = generation_run.generations.first()
    Generation.objects.filter(pk=failed.pk).update(outcome="truncated")
    scores = generation_scores(list(generation_run.generations.select_related("procedure", "run")))
    assert failed.pk not in scores and len(scores) == 16


def test_leaderboard_shows_score_beside_how2score(components_server, generation_run):
    _extract(generation_run)
    for generation in generation_run.generations.all():
        Judgment.objects.create(generation=generation, judge="how2judge", has_failure=False)
    [row] = [r for r in leaderboard("how2judge") if r["model"] == "qwen3-8b"]
    assert row["how2score"] == 1.0 and row["how2score_percent"] == 100.0
    assert row["score_n"] == 17
    assert row["score"] == pytest.approx(generation_run_score(generation_run)["score"])
    summary = generation_run_score(generation_run)
    assert row["score_ci95"] == summary["ci95"]["score"]
    # the leaderboard's SCORE carries the run page's reason and labels (one selector)
    assert row["score_not_estimable"] == summary["not_estimable"]["score"]
    assert row["score_interval_name"] == summary["interval_name"]
    assert row["score_approximate"] is summary["approximate"] is True  # 17 generations


def test_the_leaderboard_says_why_a_score_has_no_interval(researcher_client, components_server, generation_run):
    for generation in generation_run.generations.all():
        Judgment.objects.create(generation=generation, judge="how2judge", has_failure=False)
    html = researcher_client.get(reverse("leaderboard") + "?judge=how2judge").content.decode()
    # every generation scores 0.0: no "95% CI 0.00–0.00", the reason instead
    assert "interval not estimable (n = 17)" in html
    assert "95% CI 0.00–0.00" not in html and "95% CI –" not in html


def test_demo_leaderboard_has_rule_based_score_offline(researcher_client, demo):
    rows = leaderboard("How2Judge")
    assert rows and all(r["score"] is not None and 0 <= r["score"] <= SCORE_MAX for r in rows)
    html = researcher_client.get(reverse("leaderboard")).content.decode()
    assert ">SCORE</th>" in html


def test_run_page_shows_score_and_admins_start_an_extraction(admin_client_, components_server, generation_run):
    url = reverse("generation_run_detail", args=[generation_run.pk])
    html = admin_client_.get(url).content.decode()
    assert 'id="score-summary"' in html and "Components: rule" in html
    response = admin_client_.post(reverse("components_run_launch", args=[generation_run.pk]))
    assert response.status_code == 302
    assert ComponentsRun.objects.filter(generation_run=generation_run, name="qwen3-8b-bench-components-1").exists()


def test_extraction_without_an_llm_is_refused_and_stores_nothing(
    admin_client_, settings, components_server, generation_run
):
    roles = dict(settings.LLM_ROLES)
    roles["extract_components"] = {"base_url": "", "api_key": "", "model": "", "temperature": None, "max_tokens": None}
    settings.LLM_ROLES = roles
    response = admin_client_.post(reverse("components_run_launch", args=[generation_run.pk]), follow=True)
    assert "The components run was not started" in response.content.decode()
    assert not ComponentsRun.objects.exists()


def test_researchers_cannot_start_an_extraction(researcher_client, components_server, generation_run):
    response = researcher_client.post(reverse("components_run_launch", args=[generation_run.pk]))
    assert response.status_code == 403
    assert not ComponentsRun.objects.exists()


def test_execute_returns_early_for_a_missing_or_finished_run(components_server, generation_run):
    assert components_run_execute(run_id=999_999) == "gone"
    run = _extract(generation_run)
    # one step list got a wrong count (parse_failed): the run says it finished with failures
    assert components_run_execute(run_id=run.pk) == "not active (done_with_failures)"


def test_bench_run_components_extracts_and_status_reports_score(components_server, generation_run, capsys):
    from django.core.management import CommandError, call_command

    # one step list gets a wrong count: the command says the run's true status and fails
    with pytest.raises(CommandError, match="components run 'qwen3-8b-bench-components-1' ended done_with_failures"):
        call_command("bench_run", "components", "--run", generation_run.name, "--wait")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("components run 'qwen3-8b-bench-components-1'")
    assert out[1] == "finished: done_with_failures; 1 of 23 requests failed (parse_failed 1)"
    printed = json.loads(out[2])
    assert printed["extractor"].startswith("llm:m@") and printed["n_scored"] == 17
    call_command("bench_run", "status", generation_run.name)
    status = json.loads(capsys.readouterr().out)
    assert status["score"] == printed


def test_bench_run_components_names_an_unknown_run(components_server):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="no generation run named 'nope'"):
        call_command("bench_run", "components", "--run", "nope")


# -- failures are never answers: a wrong count is re-asked, by Retry failed and by a new run --


def _components_requests(server):
    return [r for r in server.chat_requests() if r.get("response_format")]


def _answer_every_list(server):
    """The extractor recovers: one triple per step for every list, "reticello" included."""
    generate = server.default

    def answer(body):
        if not body.get("response_format"):
            return generate(body)
        steps = _numbered_steps(last_user_message(body))
        return Reply(json.dumps({"steps": [{"action": "do", "objects": [], "parameters": []} for _ in steps]}))

    server.default = answer


def _reticello_hash(generation_run):
    [steps] = {
        tuple(s)
        for g in generation_run.generations.select_related("procedure")
        for s in (g.procedure.steps, g.predicted_steps)
        if any("reticello" in x.lower() for x in s)
    }
    return steps_hash(list(steps))


def _extract_with_one_failure(generation_run, name="components-1"):
    run = components_run_create(name=name, generation_run=generation_run, start=False)
    components_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done_with_failures"
    return run


def test_a_wrong_count_is_refused_by_the_schema_and_retry_failed_asks_exactly_that_list(
    components_server, generation_run
):
    run = _extract_with_one_failure(generation_run)
    key = run.llm_job.keys[run.steps_hashes.index(_reticello_hash(generation_run))]
    entry = LedgerEntry.objects.get(key=key)
    assert entry.outcome == "parse_failed" and "steps" in entry.error  # never an ok answer in the ledger
    assert run.llm_job.outcome_counts == {"ok": len(run.steps_hashes) - 1, "parse_failed": 1}

    _answer_every_list(components_server)
    before = len(_components_requests(components_server))
    assert run_control(run, "retry") == 1
    assert components_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    sent = _components_requests(components_server)[before:]
    assert len(sent) == 1 and "reticello" in last_user_message(sent[0]).lower()
    assert run.status == "done"
    extraction = ComponentExtraction.objects.get(extractor=run.extractor, steps_hash=_reticello_hash(generation_run))
    assert extraction.outcome == "ok" and len(extraction.components) == len(extraction.steps)
    assert LedgerEntry.objects.get(key=key).history[0]["outcome"] == "parse_failed"


def test_a_new_components_run_asks_again_for_the_lists_whose_extraction_failed(components_server, generation_run):
    first = _extract_with_one_failure(generation_run)
    _answer_every_list(components_server)
    before = len(_components_requests(components_server))
    second = components_run_create(name="components-2", generation_run=generation_run, start=False)
    assert second.steps_hashes == [_reticello_hash(generation_run)]  # the ok extractions are reused
    assert components_run_execute(run_id=second.pk) == "done"
    second.refresh_from_db()
    assert second.status == "done" and len(_components_requests(components_server)) - before == 1
    assert not ComponentExtraction.objects.filter(extractor=first.extractor).exclude(outcome="ok").exists()
    assert generation_run_score(generation_run)["n_rule_based"] == 0


def test_an_ok_answer_from_an_older_ledger_with_a_wrong_count_is_marked_failed_and_asked_again(
    components_server, generation_run, monkeypatch
):
    # Jobs created before the count was bounded asked with the unbounded schema: the ledger
    # holds the wrong count as ok. Storing it refuses it, and the ledger entry says so.
    monkeypatch.setattr("judging.score_services.components_schema", lambda n_steps: COMPONENTS_SCHEMA)
    run = _extract_with_one_failure(generation_run)
    key = run.llm_job.keys[run.steps_hashes.index(_reticello_hash(generation_run))]
    entry = LedgerEntry.objects.get(key=key)
    assert entry.outcome == "parse_failed" and entry.parsed is None
    assert "expected" in entry.error and "steps" in entry.error and entry.response_text
    job = LLMJob.objects.get(pk=run.llm_job_id)
    assert job.status == "done_with_failures" and job.outcome_counts.get("parse_failed") == 1

    _answer_every_list(components_server)
    before = len(_components_requests(components_server))
    assert run_control(run, "retry") == 1
    assert components_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.status == "done" and len(_components_requests(components_server)) - before == 1
    history = LedgerEntry.objects.get(key=key).history
    assert len(history) == 1 and history[0]["outcome"] == "parse_failed" and "expected" in history[0]["error"]


def test_every_score_mean_carries_its_bootstrap_interval_and_n(components_server, generation_run, researcher_client):
    from core.intervals import ITEM_BOOTSTRAP, bootstrap_mean_estimate, interval_fields

    summary = generation_run_score(generation_run)
    generations = list(generation_run.generations.select_related("procedure", "run"))
    per_generation = [result.result.score for result in generation_scores(generations).values()]
    assert summary["n_scored"] == len(per_generation) == 17
    assert {k: summary[k] for k in ("interval", "interval_name", "approximate")} == interval_fields(ITEM_BOOTSTRAP, 17)
    assert (summary["ci95"]["score"], summary["not_estimable"]["score"]) == bootstrap_mean_estimate(per_generation)
    # The scripted model's 17 generations all score 0.0: every resample's mean is 0.0, so the
    # interval is not estimable (it used to be shown as the zero-width [0.000, 0.000]).
    assert set(per_generation) == {0.0}
    assert summary["ci95"]["score"] is None
    reason = summary["not_estimable"]["score"]
    assert reason.startswith("interval not estimable (n = 17)")
    for key in ("step_m", "order_strict", "order_lcs_eval", "order_tau", "semantic"):
        interval = summary["ci95"][key]
        assert (interval is None) != (summary["not_estimable"][key] is None)
        assert interval is None or interval[1] > interval[0]
    # The run page and the API say the same.
    page = researcher_client.get(f"/runs/generation/{generation_run.pk}/").content.decode()
    assert "interval not estimable (n = 17)" in page and "95% CI 0.000–0.000" not in page
    assert "approximate" in page
    api = researcher_client.get(f"/api/judging/generation-runs/{generation_run.pk}/").json()
    assert api["score"]["ci95"]["score"] is None and api["score"]["not_estimable"]["score"] == reason
    assert api["score"]["approximate"] is True
