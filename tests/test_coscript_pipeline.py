"""CoScript runs end to end against the scripted OpenAI-compatible server on 127.0.0.1: the
specific-goal stage per constraint type, the sensitive-domain screen and its review list,
K scripts per goal at Table 11's sampling with retrieved examples, the filter's kept rates,
resuming, API errors, the export the faithfulness study reads, the constrained split, and
the coscript_run command."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from coscript.models import CandidateScript, CoScriptRun, Review, SpecificGoal
from coscript.phase_services import coscript_run_execute, coscript_run_filter
from coscript.result_services import coscript_add_to_benchmark, coscript_export, export_records, specific_goal_review
from coscript.run_services import coscript_run_create, coscript_run_resume
from judging.services import language_model_register
from mining.models import Procedure
from tests import coscript_world
from tests.scripted_llm import Reply, Status, last_user_message


@pytest.fixture
def server(settings):
    with coscript_world.scripted_server(settings) as scripted:
        yield scripted


@pytest.fixture
def world(db):
    return coscript_world.make_procedures()


def _texts(server, marker: str) -> list[dict]:
    return [r for r in server.chat_requests() if marker in last_user_message(r)]


def _finished_run(name="r1", **options) -> CoScriptRun:
    model = language_model_register(name="scripted-model")
    run = coscript_run_create(name=name, language_model=model, split="bench", start=False, **options)
    assert coscript_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    return run


@pytest.mark.django_db(transaction=True)
def test_specific_goals_come_one_request_per_abstract_goal_and_constraint_type(world, server):
    run = _finished_run()
    requests = _texts(server, "Create possible Specific Goals")
    assert len(requests) == 4 * 3  # four abstract goals, three constraint types (§4.2)
    cake_method = next(
        last_user_message(r)
        for r in requests
        if "Abstract Goal: Make a cake\n" in last_user_message(r) and "is Method" in last_user_message(r)
    )
    # Table 13's method examples, Table 1's definition, and the abstract goal last.
    assert "Abstract Goal: Register to vote\nConstraint: Online; Specific Goal: Register to vote online" in cake_method
    assert "A tool or specified mode that controls the process" in cake_method
    assert cake_method.rstrip().endswith("Abstract Goal: Make a cake")
    assert "Say Goodbye" not in cake_method  # the modifier examples belong to the modifier prompt
    goals = {(g.constraint_type, g.specific_goal) for g in run.goals.all()}
    assert ("method", "Make a cake in a microwave") in goals and ("intent", "Clean your skin before bed") in goals
    # "Make a chocolate cake" came back under modifier and method: kept once, under the first type.
    assert run.goals.filter(specific_goal="Make a chocolate cake").get().constraint_type == "modifier"
    assert run.report["goals"]["dropped"] == {"duplicate": 1}
    assert run.report["goals"]["by_type"] == {"modifier": 3, "method": 3, "intent": 3}
    cake = run.goals.filter(abstract_goal="Make a cake").first()
    assert cake is not None
    assert cake.topic == "Food & Dining" and cake.abstract_procedure == world["Make a cake"]


@pytest.mark.django_db(transaction=True)
def test_the_sensitive_screen_sends_flagged_goals_to_the_review_list(world, server):
    run = _finished_run()
    screened = _texts(server, "sensitive and high-risk domains")
    assert len(screened) == run.goals.count() == 9
    assert "Goal: Treat COVID-19 at Home\nAnswer: Yes" in last_user_message(screened[0])  # Table 12's examples
    flagged = run.goals.get(review=Review.PENDING)
    assert flagged.specific_goal == "Clean your skin with medication" and flagged.sensitive is True
    assert run.report["screen"] == {"cleared": 8, "sensitive": 1, "flagged": 1}
    # Held back from the export until a reviewer decides.
    assert all(r["specific_goal"] != flagged.specific_goal for r in export_records(run, candidates="all"))
    specific_goal_review(goal=flagged, decision=Review.APPROVED)
    assert any(r["specific_goal"] == flagged.specific_goal for r in export_records(run, candidates="all"))
    specific_goal_review(goal=flagged, decision=Review.REMOVED)
    assert all(r["specific_goal"] != flagged.specific_goal for r in export_records(run, candidates="all"))
    other = run.goals.exclude(pk=flagged.pk).first()
    assert other is not None
    with pytest.raises(ValueError, match="was not flagged"):
        specific_goal_review(goal=other, decision=Review.REMOVED)


@pytest.mark.django_db(transaction=True)
def test_an_unreadable_screen_answer_also_needs_review(world, server):
    server.on(
        lambda body: (
            "sensitive and high-risk" in last_user_message(body)
            and "Vanilla" not in last_user_message(body)
            and "vanilla cake" in last_user_message(body)
        ),
        Reply("Hard to say."),
    )
    run = _finished_run()
    vanilla = run.goals.get(specific_goal="Make a vanilla cake")
    assert vanilla.sensitive is None and vanilla.review == Review.PENDING
    assert run.report["screen"]["unreadable"] == 1 and run.report["screen"]["flagged"] == 2


@pytest.mark.django_db(transaction=True)
def test_k_scripts_per_goal_use_table_11s_sampling_a_seed_each_and_retrieved_examples(world, server):
    run = _finished_run(k=3, seed=5, screen=False)
    scripts = _texts(server, "List the steps of")
    assert len(scripts) == run.goals.count() * 3
    assert not _texts(server, "sensitive and high-risk domains")  # screen off
    for body in scripts:
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (1.0, 1.0, 512)
        assert (body["presence_penalty"], body["frequency_penalty"]) == (0.0, 0.0)
    chocolate = [r for r in scripts if "Specific Goal: Make a chocolate cake" in last_user_message(r)]
    assert sorted(r["seed"] for r in chocolate) == [50, 51, 52]  # distinct seeds: three ledger entries
    prompt = last_user_message(chocolate[0])
    # Two similar procedures by the verb "make" and the noun "cake" (§4.3, Table 2 II).
    assert re.findall(r"^Goal: (.+)$", prompt, re.M) == ["Make a cake", "Make a cupcake"]
    assert "1. Gather your ingredients." in prompt
    assert prompt.startswith('List the steps of "Make a cake"')
    assert CandidateScript.objects.filter(goal__run=run).count() == run.goals.count() * 3


@pytest.mark.django_db(transaction=True)
def test_the_filter_keeps_faithful_scripts_and_reports_kept_rates_per_constraint_type(world, server):
    run = _finished_run(screen=False)
    report = run.report["filter"]
    assert report["mode"] == "embedding+keyword" and report["embedding_model"] == "all-MiniLM-L6-v2"
    total = report["total"]
    assert total["candidates"] == 18 and total["kept"] == CandidateScript.objects.filter(kept=True).count()
    for constraint_type, row in report["by_type"].items():
        kept = CandidateScript.objects.filter(goal__run=run, goal__constraint_type=constraint_type, kept=True).count()
        assert row["kept"] == kept and row["kept_rate"] == pytest.approx(kept / row["candidates"])
    # Every faithful script (candidate 0) names its constraint and is kept for its own goal.
    faithful = CandidateScript.objects.filter(goal__run=run, index=0)
    assert all(c.kept for c in faithful), [(c.goal.specific_goal, c.scores) for c in faithful if not c.kept]
    # A generic script loses to a sibling goal for most goals.
    assert CandidateScript.objects.filter(goal__run=run, index=1, reason="outranked").count() >= 5
    # One chosen script per goal with a kept candidate.
    for goal in run.goals.all():
        n_kept = goal.candidates.filter(kept=True).count()
        assert goal.candidates.filter(selected=True).count() == (1 if n_kept else 0)


@pytest.mark.django_db(transaction=True)
def test_filtering_again_in_keyword_mode_changes_verdicts_without_calling_the_model(world, server):
    run = _finished_run(screen=False)
    sent = len(server.requests)
    report = coscript_run_filter(run=run, mode="keyword")
    assert len(server.requests) == sent
    run.refresh_from_db()
    assert run.filter_mode == "keyword" and run.report["filter"]["mode"] == "keyword"
    # The generic script names no constraint: dropped everywhere in keyword mode.
    assert not CandidateScript.objects.filter(goal__run=run, index=1, kept=True).exists()
    assert report["total"]["reasons"]["missing_keywords"] >= 9


@pytest.mark.django_db(transaction=True)
def test_a_rerun_is_answered_from_the_ledger_and_a_finished_run_does_nothing(world, server):
    run = _finished_run(screen=False)
    sent = len(server.requests)
    assert coscript_run_execute(run_id=run.pk) == "not active (done)"
    again = _finished_run(name="r2", screen=False)
    assert len(server.requests) == sent  # same prompts, same parameters: every answer from the ledger
    assert again.goals.count() == run.goals.count()
    assert coscript_run_execute(run_id=999999) == "gone"


@pytest.mark.django_db(transaction=True)
def test_api_errors_pause_the_run_and_resume_sends_them_again(world, server):
    failing = {"on": True}
    server.default = lambda body: (
        Status(500, "down") if failing["on"] and "Vanilla" in last_user_message(body) else coscript_world.answer(body)
    )
    model = language_model_register(name="scripted-model")
    run = coscript_run_create(name="r1", language_model=model, split="bench", start=False, screen=False)
    outcome = coscript_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert outcome.startswith("paused") and run.status == "paused" and run.phase == "scripts"
    assert "2 of 18 candidate scripts requests have no usable answer (api_error 2" in run.pause_reason
    assert not CandidateScript.objects.filter(goal__run=run).exists()  # nothing half-collected
    failing["on"] = False
    coscript_run_resume(run=run, enqueue=False)
    assert coscript_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    vanilla = run.goals.get(specific_goal="Make a vanilla cake")
    assert all(c.outcome == "ok" and c.steps for c in vanilla.candidates.all())


@pytest.mark.django_db(transaction=True)
def test_resuming_without_the_failed_requests_counts_them_as_no_script(world, server):
    server.default = lambda body: (
        Status(500, "down") if "Vanilla" in last_user_message(body) else coscript_world.answer(body)
    )
    model = language_model_register(name="scripted-model")
    run = coscript_run_create(name="r1", language_model=model, split="bench", start=False, screen=False)
    coscript_run_execute(run_id=run.pk)
    coscript_run_resume(run=CoScriptRun.objects.get(pk=run.pk), without_errors=True, enqueue=False)
    assert coscript_run_execute(run_id=run.pk) == "done_with_failures"  # going on without them is not "done"
    run.refresh_from_db()
    assert run.report["accepted_errors"] == ["scripts"]
    assert run.report["filter"]["by_type"]["modifier"]["reasons"]["no_script"] == 2


@pytest.mark.django_db(transaction=True)
def test_a_base_model_gets_plain_completions_that_stop_at_the_blank_line(world, server):
    """Every prompt's examples are blocks separated by a blank line; a base model without a
    stop writes blocks of its own until it is cut off (seen at vLLM with SmolLM2-135M: every
    specific-goal answer truncated), so each phase's completion stops at "\n\n"."""

    def base_model(body):
        text = last_user_message(body)
        if "Create possible Specific Goals" in text:
            return Reply("\nConstraint: Chocolate; Specific Goal: Make a chocolate cake")
        if "sensitive and high-risk domains" in text:
            return Reply(" No")
        return Reply(" Melt the chocolate.\n2. Bake the chocolate cake.")

    server.default = base_model
    model = language_model_register(name="scripted-base", prompt_style="base")
    run = coscript_run_create(name="r1", language_model=model, split="bench", limit=1, start=False)
    assert coscript_run_execute(run_id=run.pk) == "done"
    sent = server.chat_requests()
    assert sent and all(body.get("messages") is None and body["stop"] == ["\n\n"] for body in sent)
    stages = {"Create possible Specific Goals", "sensitive and high-risk domains", "List the steps of"}
    assert {s for s in stages for body in sent if s in body["prompt"]} == stages  # all three phases
    assert next(b for b in sent if "List the steps of" in b["prompt"])["prompt"].endswith("Steps:\n1.")
    run.refresh_from_db()
    assert run.goals.count() == 1 and run.report["scripts"]["outcomes"] == {"ok": 2}
    assert (
        CandidateScript.objects.filter(goal__run=run, steps=["Melt the chocolate.", "Bake the chocolate cake."]).count()
        == 2
    )
    # a chat model's requests carry no stop of the product's
    chat = coscript_run_create(
        name="r2", language_model=language_model_register(name="scripted-chat"), split="bench", limit=1, start=False
    )
    before = len(server.chat_requests())
    server.default = coscript_world.answer
    coscript_run_execute(run_id=chat.pk)
    assert all("stop" not in body for body in server.chat_requests()[before:])


@pytest.mark.django_db(transaction=True)
def test_bad_run_settings_are_refused_before_anything_is_stored(world, server):
    model = language_model_register(name="scripted-model")
    refused: list[tuple[dict[str, Any], str]] = [
        ({"k": 0}, "k must be between 1 and 10"),
        ({"filter_mode": "rules"}, "filter mode"),
        ({"limit": 0}, "limit must be at least 1"),
        ({"split": "train"}, "no procedures in split"),
        ({"keyword_bonus": -1}, "must not be negative"),
    ]
    for options, message in refused:
        with pytest.raises(ValueError, match=message):
            coscript_run_create(name="bad", language_model=model, start=False, **options)
    assert not CoScriptRun.objects.exists()
    coscript_run_create(name="ok", language_model=model, start=False)
    with pytest.raises(ValueError, match="exists"):
        coscript_run_create(name="ok", language_model=model, start=False)


@pytest.mark.django_db(transaction=True)
def test_a_limit_draws_abstract_goals_with_the_seed(world, server):
    model = language_model_register(name="scripted-model")
    a = coscript_run_create(name="a", language_model=model, limit=2, seed=1, start=False)
    b = coscript_run_create(name="b", language_model=model, limit=2, seed=1, start=False)
    assert a.abstract_ids == b.abstract_ids and len(a.abstract_ids) == 2
    assert a.goals_job is not None and a.goals_job.n_total == 6


@pytest.mark.django_db(transaction=True)
def test_the_export_is_what_the_faithfulness_study_reads(world, server, tmp_path):
    from annotate.kinds.constraint_faithfulness.definition import parse_record

    run = _finished_run()
    path = tmp_path / "constrained.jsonl"
    n = coscript_export(run=run, output=path, candidates="selected")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert n == len(lines) == 8  # nine goals with a script, one held by the review list
    record = next(r for r in lines if r["specific_goal"] == "Make a cake for diabetics")
    assert record["abstract_goal"] == "Make a cake" and record["constraint"] == "For diabetics"
    assert record["constraint_type"] == "intent" and record["topic"] == "Food & Dining"
    assert record["steps"][0] == "Replace sugar with a sweetener safe for diabetics."
    assert record["source"]["coscript_run"] == run.pk and record["source"]["selected"] is True
    for line in lines:
        parse_record(line)  # raises ItemRecordError on any line the study would refuse
    call_command(
        "create_study",
        "--name",
        "Faithfulness of run r1",
        "--kind",
        "constraint_faithfulness",
        "--items",
        str(path),
        "--no-qualification",
    )
    from annotate.models import Study

    study = Study.objects.get(name="Faithfulness of run r1")
    item = study.items.get(item_id=record["id"])
    assert item.goal == "Make a cake for diabetics" and item.candidate_steps == record["steps"]
    assert len(export_records(run, candidates="all")) == 16 and len(export_records(run, candidates="kept")) < 16
    with pytest.raises(ValueError, match="candidates must be one of"):
        export_records(run, candidates="some")


@pytest.mark.django_db(transaction=True)
def test_chosen_scripts_join_the_constrained_split_once(world, server):
    run = _finished_run()
    counts = coscript_add_to_benchmark(run=run)
    assert counts == {"added": 8, "held_by_review": 1}
    constrained = Procedure.objects.filter(split="constrained")
    assert constrained.count() == 8
    diabetics = constrained.get(goal="Make a cake for diabetics")
    assert diabetics.topic.name == "Food & Dining" and diabetics.resources == []
    assert (
        diabetics.provenance["constraint_type"] == "intent" and diabetics.provenance["abstract_goal"] == "Make a cake"
    )
    assert coscript_add_to_benchmark(run=run) == {"already_added": 8, "held_by_review": 1}
    assert constrained.count() == 8
    # Constrained procedures are never abstract goals of a later run.
    model = language_model_register(name="scripted-model")
    later = coscript_run_create(name="later", language_model=model, start=False)
    assert not set(later.abstract_ids) & set(constrained.values_list("id", flat=True))


@pytest.mark.django_db(transaction=True)
def test_the_command_runs_exports_and_adds_and_says_what_is_wrong(world, server, tmp_path, capsys):
    with pytest.raises(CommandError, match="no registered language model named 'nobody'"):
        call_command("coscript_run", "start", "--name", "c", "--model", "nobody")
    call_command(
        "coscript_run", "start", "--name", "c", "--model", "scripted", "--model-id", "m", "--split", "bench", "--wait"
    )
    out = capsys.readouterr().out
    assert "CoScript run 'c'" in out and "4 abstract goals, 12 specific-goal requests" in out
    assert re.search(r"modifier: kept \d+ / 6 candidates", out) and "total: kept" in out
    call_command("coscript_run", "status", "c")
    status = json.loads(capsys.readouterr().out)
    assert status["phase"] == "done" and status["jobs"]["candidate scripts"]["requests"] == 18
    call_command("coscript_run", "filter", "c", "--mode", "keyword")
    assert "filter keyword" in capsys.readouterr().out
    call_command("coscript_run", "export", "c", "--output", str(tmp_path / "out.jsonl"), "--candidates", "all")
    assert "16 lines" in capsys.readouterr().out
    call_command("coscript_run", "add-to-benchmark", "c")
    assert "added:" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no CoScript run named 'nope'"):
        call_command("coscript_run", "status", "nope")
    with pytest.raises(CommandError, match="k must be between"):
        call_command("coscript_run", "start", "--name", "d", "--model", "scripted", "--k", "11", "--wait")
    with pytest.raises(CommandError, match="the prompt never uses|cannot read the prompt file"):
        call_command("coscript_run", "start", "--name", "e", "--model", "scripted", "--prompts-dir", str(tmp_path))
    assert not SpecificGoal.objects.filter(run__name__in=["d", "e"]).exists()
