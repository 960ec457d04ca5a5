"""The product's pipelines end to end against a real inference server: vLLM (CPU build) serving
SmolLM2-135M-Instruct on 127.0.0.1 (tests/real_servers.py). Marked ``real_server``: `make
test-real` runs them.

Each runs through the path a user triggers: a mining run over a corpus imported from a file
(``mine_run --wait``, then ``mine_run --status``), a goal-step evaluation
(``goalstep_evaluate``), a CoScript run (``coscript_run start --wait``, resumed without its
failed requests as the run page offers). What is checked is the product's handling of what a
real model really answers (every document, prediction and candidate ends somewhere stated,
the counts add up, no ``api_error`` where the server answered, statuses that tell the truth),
never the quality of a 135M model's answers."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from core.intervals import wilson_interval
from coscript.models import CandidateScript, CoScriptRun
from coscript.phase_services import coscript_run_execute
from coscript.run_services import coscript_run_resume
from coscript.selectors import coscript_run_collected, coscript_run_state
from goalstep.constants import USABLE_OUTCOMES
from goalstep.models import TaskItem, TaskSet
from goalstep.selectors import task_evaluation_accuracy
from judging.services import language_model_register
from llm.constants import OUTCOMES
from llm.models import LedgerEntry
from mining.corpus_services import corpus_import
from mining.models import MiningCandidate, MiningRun, Procedure, StageResult
from mining.procedure_services import topics_ensure
from mining.run_selectors import mining_run_progress
from mining.stages import LLM_STAGES, PIPELINE
from tests import coscript_world
from tests.files import write_records
from tests.real_servers import RealServer, roles_point_at

pytestmark = [pytest.mark.real_server, pytest.mark.django_db(transaction=True)]

# Every outcome of a call but api_error: the server answered, so the product must have read it.
USABLE_CALLS = set(OUTCOMES) - {"api_error"}
# What a mining stage can say of a document when the server answered.
STAGE_STATUSES = {"passed", "rejected", "parse_failed", "truncated", "refused", "too_long"}

# Answer budgets per role, as <PREFIX>_MAX_TOKENS would set them: a 135M model on two cores
# writes ~20 tokens a second, and under a grammar it often writes until it is cut off.
MAX_TOKENS = {
    "extract_procedure": 160,
    "llm_filter": 48,
    "rewrite": 160,
    "extract_resources": 48,
    "final_validation": 240,
    "generate": 48,
}


@pytest.fixture
def roles(settings, vllm: RealServer):
    """Every LLM role pointed at the real server, with small answer budgets."""
    return roles_point_at(settings, vllm, max_tokens=MAX_TOKENS)


# ---------------------------------------------------------------------------- mining

DOCUMENTS = [
    {
        "id": "tea",
        "topic": "Food & Dining",
        "url": "https://example.org/green-tea",
        "text": (
            "How to brew green tea\n\n"
            "Green tea turns bitter when the water is too hot. Here is how to brew a good cup.\n"
            "1. Heat fresh water to about 80 degrees Celsius.\n"
            "2. Warm the teapot with a little hot water and pour it out.\n"
            "3. Put one teaspoon of loose green tea per cup into the pot.\n"
            "4. Pour the water over the leaves.\n"
            "5. Steep for two minutes.\n"
            "6. Strain the tea into cups and serve at once.\n"
        ),
    },
    {
        "id": "shelf",
        "topic": "Home & Hobbies",
        "url": "https://example.org/shelf",
        "text": (
            "How to hang a wall shelf\n\n"
            "1. Choose a spot and find the studs with a stud finder.\n"
            "2. Hold the shelf against the wall and mark the bracket holes with a pencil.\n"
            "3. Check the marks with a spirit level.\n"
            "4. Drill pilot holes at the marks.\n"
            "5. Screw the brackets to the wall.\n"
            "6. Set the shelf on the brackets and screw it down.\n"
        ),
    },
    {
        "id": "news",
        "topic": "Home & Hobbies",
        "url": "https://example.org/news",
        "text": "The town council met on Tuesday and agreed to repaint the library next spring.\n",
    },
]

# A small model loops under a grammar at temperature 0 ("The steps are to cut the board to
# length.", over and over, until it is cut off); vLLM's repetition penalty, passed through each
# stage's ``params``, lets it finish, and three steps are enough for the heuristics, so that
# documents reach the later stages too. A failed call is not tried again by the run
# (failure_retries 0): at temperature 0 the same request gets the same cut-off answer, and
# the client has already retried it with twice the budget.
MINING_CONFIG = """\
name: real-mining
candidates_per_topic: 5
concurrency: 2
min_steps: 3
failure_retries: 0
stages:
  extract_procedure: {params: {repetition_penalty: 1.3}}
  llm_filter: {params: {repetition_penalty: 1.3}}
  rewrite: {params: {repetition_penalty: 1.3}}
  extract_resources: {params: {repetition_penalty: 1.3}}
  final_validation: {params: {repetition_penalty: 1.3}}
"""


def test_a_mining_run_over_a_small_corpus_on_the_real_server(vllm, roles, tmp_path, capsys, researcher_client):
    topics_ensure()  # a transactional test's flush removes the topics the migration seeded
    corpus_import(name="real-web", path=write_records(tmp_path, "docs", DOCUMENTS, "jsonl"))
    config = tmp_path / "run.yaml"
    config.write_text(MINING_CONFIG)

    try:
        call_command("mine_run", "--corpus", "real-web", "--config", str(config), "--wait")
        refused = None
    except CommandError as exc:  # --wait ends non-zero unless the run ended done
        refused = str(exc)
    finished = capsys.readouterr().out
    run = MiningRun.objects.get(name="real-mining")

    # Every document was walked to an end the run can name: a procedure, a rejection with its
    # reason, or a failed call with its outcome; none is left pending, none is an api_error.
    candidates = list(MiningCandidate.objects.filter(run=run).select_related("document"))
    assert sorted(c.document.doc_id for c in candidates) == sorted(d["id"] for d in DOCUMENTS)
    for candidate in candidates:
        results = list(StageResult.objects.filter(candidate=candidate))
        assert results, candidate.document.doc_id
        last = next(r for r in results if r.stage == candidate.stage)
        assert last.status in STAGE_STATUSES, (candidate.document.doc_id, last.status, last.reason)
        assert candidate.status in ("passed", "rejected", "failed"), candidate.status
        if candidate.status == "passed":
            assert last.stage == PIPELINE[-1] and last.status == "passed"
        elif candidate.status == "rejected":
            assert last.status == "rejected" and candidate.reason
        else:  # the reason names the failed call's outcome
            assert last.status not in ("passed", "rejected") and candidate.reason.startswith(last.status)
        # only a passed stage moves a document on
        stages = [r.stage for r in sorted(results, key=lambda r: PIPELINE.index(r.stage))]
        assert stages == list(PIPELINE[: len(stages)])
        assert all(r.status == "passed" for r in results if r.stage != candidate.stage)
    assert not StageResult.objects.filter(run=run, status="api_error").exists()
    assert Procedure.objects.count() == sum(c.status == "passed" for c in candidates)

    # The mining page's counts add up to the documents.
    progress = mining_run_progress(run)
    totals = progress["totals"]
    by_status = {s: sum(c.status == s for c in candidates) for s in ("passed", "rejected", "failed")}
    assert totals["sampled"] == len(DOCUMENTS) and totals["pending"] == 0
    assert (totals["procedures"], totals["rejected"], totals["failed"]) == (
        by_status["passed"],
        by_status["rejected"],
        by_status["failed"],
    )
    assert totals["finished"] == len(DOCUMENTS)
    assert totals["yield"]["n"] == by_status["passed"] + by_status["rejected"]
    assert totals["yield"]["left_out"] == {"in_flight": 0, "not_asked": 0, "failed": by_status["failed"]}
    assert progress["outcomes"]["api_error"] == 0
    assert sum(progress["outcomes"].values()) == StageResult.objects.filter(run=run).count()
    for cell in progress["funnel"]:  # every document is past a stage, dropped at or before it, or never got there
        assert cell["passed"] + cell["dropped"] + cell["in_flight"] == len(DOCUMENTS), cell
        assert cell["in_flight"] == 0
    first = progress["funnel"][0]
    assert first["reached"] == len(DOCUMENTS)

    # The run's status tells the truth: done only when no document failed.
    assert run.status == ("done" if by_status["failed"] == 0 else "done_with_failures"), (run.status, run.error)
    assert (refused is None) == (run.status == "done"), refused
    assert refused is None or f"ended {run.status}, not done" in refused, refused
    assert f"finished: {run.status}" in finished

    # Every LLM stage was asked on the real server with its JSON schema, and answered.
    entries = LedgerEntry.objects.filter(run=run.ledger_run)
    assert entries.exists()
    assert set(entries.values_list("path", flat=True)) == {"json_schema"}
    assert set(entries.values_list("stage", flat=True)) <= set(LLM_STAGES)
    assert set(entries.values_list("outcome", flat=True)) <= USABLE_CALLS

    call_command("mine_run", "--status", "real-mining")
    status = json.loads(capsys.readouterr().out)
    assert status["status"] == run.status and status["outcomes"]["api_error"] == 0
    assert status["totals"]["finished"] == len(DOCUMENTS)
    assert status["totals"]["failed"] == by_status["failed"]
    assert status["n_failed"] == sum(n for o, n in status["outcomes"].items() if o in USABLE_CALLS - {"ok"})
    for page in (f"/mining/runs/{run.pk}/", f"/mining/runs/{run.pk}/documents/"):
        assert researcher_client.get(page).status_code == 200, page


# ---------------------------------------------------------------------------- goal-step

GOALSTEP_ITEMS = [
    # (goal, candidates, label, topic)
    ("Brew green tea", ["Heat the water", "Sand the board", "Wax the skis", "Tune the guitar"], 0, "Food & Dining"),
    ("Hang a shelf", ["Knead the dough", "Drill pilot holes", "Feed the cat", "Water the roses"], 1, "Home & Hobbies"),
    ("Wash a car", ["Bake the bread", "Read the map", "Rinse off the soap", "Sing the chorus"], 2, "Transportation"),
]


@pytest.mark.parametrize("prompt_style", ["inst", "base"])  # a chat prompt, and a completion ending "Answer:"
def test_a_goal_step_evaluation_on_the_real_server(vllm, roles, capsys, researcher_client, prompt_style):
    task_set = TaskSet.objects.create(task="step_inference", split="bench", seed=0, n_items=len(GOALSTEP_ITEMS))
    for position, (prompt, candidates, label, topic) in enumerate(GOALSTEP_ITEMS):
        TaskItem.objects.create(
            task_set=task_set,
            item_id=f"real-{position}",
            position=position,
            prompt=prompt,
            candidates=candidates,
            label=label,
            topic=topic,
            source_procedure_ids=[position],
        )
    language_model_register(
        name="smollm2-real", base_url=vllm.base_url, model=vllm.model, prompt_style=prompt_style, max_tokens=40
    )

    try:
        call_command(
            "goalstep_evaluate", "--task-set", str(task_set.pk), "--model", "smollm2-real", "--concurrency", "2"
        )
        refused = None
    except CommandError as exc:  # it ends non-zero unless the evaluation ended done
        refused = str(exc)
    out = capsys.readouterr().out
    evaluation = task_set.evaluations.get()

    predictions = list(evaluation.predictions.all())
    assert len(predictions) == len(GOALSTEP_ITEMS)  # every item has its prediction
    for p in predictions:
        assert p.outcome in USABLE_CALLS | set(USABLE_OUTCOMES), p.outcome
        assert p.outcome != "api_error"
        # only a read answer has a choice and is right or wrong
        assert (p.choice is not None) == (p.outcome == "ok") == (p.correct is not None), (p.outcome, p.completion)

    result = task_evaluation_accuracy(evaluation)
    outcomes = {o: sum(p.outcome == o for p in predictions) for o in {p.outcome for p in predictions}}
    assert result["outcomes"] == outcomes
    assert result["readable"] == outcomes.get("ok", 0)
    assert result["ambiguous"] == outcomes.get("ambiguous", 0)
    assert result["unparseable"] == outcomes.get("unparseable", 0)
    assert result["answered"] == result["readable"] + result["ambiguous"] + result["unparseable"]
    assert result["n_unusable"] == len(predictions) - result["answered"]
    assert result["n_items"] == len(GOALSTEP_ITEMS) and result["n_unanswered"] == 0
    assert result["correct"] == sum(bool(p.correct) for p in predictions)
    # accuracy's n is the scored (readable) answers
    interval = wilson_interval(result["correct"], result["readable"])
    assert result["ci95"] == (list(interval) if interval else None)
    if result["readable"]:
        assert result["accuracy"] == pytest.approx(result["correct"] / result["readable"])
    else:
        assert result["accuracy"] is None

    evaluation.refresh_from_db()
    # done only when every call had a usable answer (ambiguous and unparseable answers are answers)
    assert evaluation.status == ("done" if result["n_unusable"] == 0 else "done_with_failures"), evaluation.status
    assert (refused is None) == (evaluation.status == "done"), refused
    assert f"= {result['correct']} / {result['readable']} readable of {result['answered']} answered" in out
    assert f"({result['ambiguous']} ambiguous, {result['unparseable']} unparseable: not scored)" in out
    entries = LedgerEntry.objects.filter(key__in=[p.provenance["ledger_key"] for p in predictions])
    assert entries.count() == len(predictions) and set(entries.values_list("outcome", flat=True)) <= USABLE_CALLS

    # the leaderboard page shows the same counts (also when nothing was readable: accuracy "—")
    page = researcher_client.get(f"/goalstep/step_inference/?set={task_set.pk}")
    assert page.status_code == 200
    row = next(r for r in page.context["rows"] if r["evaluation"].pk == evaluation.pk)
    assert (row["readable"], row["ambiguous"], row["unparseable"], row["n_unusable"]) == (
        result["readable"],
        result["ambiguous"],
        result["unparseable"],
        result["n_unusable"],
    )
    assert f'<td class="num ambiguous">{result["ambiguous"]}</td>' in page.content.decode()


# ---------------------------------------------------------------------------- CoScript


@pytest.mark.parametrize("prompt_style", ["inst", "base"])  # chat, and plain completions
def test_a_coscript_run_with_one_abstract_goal_on_the_real_server(vllm, roles, capsys, admin_client_, prompt_style):
    coscript_world.make_procedures()
    language_model_register(name="smollm2-real", base_url=vllm.base_url, model=vllm.model, prompt_style=prompt_style)

    try:
        call_command(
            "coscript_run",
            "start",
            "--name",
            "real-coscript",
            "--model",
            "smollm2-real",
            "--split",
            "bench",
            "--limit",
            "1",
            "--k",
            "2",
            "--concurrency",
            "2",
            "--wait",
        )
        refused = None
    except CommandError as exc:  # --wait ends non-zero unless the run ended done
        refused = str(exc)
    run = CoScriptRun.objects.get(name="real-coscript")
    assert (refused is None) == (run.status == "done"), (refused, run.status)
    assert refused is None or f"ended {run.status}, not done" in refused, refused
    assert f"finished: {run.status}" in capsys.readouterr().out
    # A phase whose requests have no usable answer pauses the run and says so; the run page
    # offers to go on without them, which is what is done here (at most once per phase), and
    # the run is then executed as the worker would.
    for _ in range(3):
        if run.status != "paused":
            break
        assert "have no usable answer" in run.pause_reason, run.pause_reason
        page = admin_client_.get(f"/coscript/runs/{run.pk}/")
        assert page.status_code == 200 and run.pause_reason in page.content.decode()
        assert admin_client_.post(f"/coscript/runs/{run.pk}/resume-without-errors/").status_code == 302
        run.refresh_from_db()
        assert run.status == "pending" and run.phase in run.report["accepted_errors"]
        coscript_run_execute(run_id=run.pk)
        run.refresh_from_db()
    run.refresh_from_db()
    assert run.status in ("done", "done_with_failures"), (run.status, run.phase, run.error)
    assert run.phase == "done"

    report = run.report
    # every specific-goal request answered and counted, none an api_error
    goals = report["goals"]
    assert goals["abstract_goals"] == 1
    assert sum(goals["requests"].values()) == 3 and "api_error" not in goals["requests"]
    assert set(goals["requests"]) <= USABLE_CALLS
    collected = coscript_run_collected(run)
    assert goals["specific_goals"] == collected["specific_goals"] == run.goals.count()
    # every ok answer gave goals or is counted as dropped with its reason
    ok_answers = goals["requests"].get("ok", 0)
    answers_with_goals = run.goals.values("provenance__ledger_key").distinct().count()
    assert answers_with_goals + sum(goals["answers_dropped"].values()) == ok_answers, goals
    if run.goals.exists():
        screen = report["screen"]
        assert screen["cleared"] + screen.get("sensitive", 0) + screen.get("unreadable", 0) == run.goals.count()
        assert screen["flagged"] == screen.get("sensitive", 0) + screen.get("unreadable", 0)
        assert run.goals.filter(review="pending").count() == screen["flagged"]

    # every candidate script counted: K per goal, each kept or dropped with its reason
    candidates = list(CandidateScript.objects.filter(goal__run=run))
    assert len(candidates) == 2 * run.goals.count() == collected["candidates"]
    scripts = report.get("scripts", {"candidates": 0, "outcomes": {}})
    assert scripts["candidates"] == len(candidates) == sum(scripts["outcomes"].values())
    assert "api_error" not in scripts["outcomes"]
    assert {c.outcome for c in candidates} <= USABLE_CALLS
    for c in candidates:
        assert c.kept is not None, (c.outcome, c.steps, c.reason)
        assert c.kept or c.reason, (c.outcome, c.steps, c.reason)
        assert not (c.kept and not c.steps)
    total = report["filter"]["total"]
    assert total["candidates"] == len(candidates)
    assert total["kept"] == sum(1 for c in candidates if c.kept)
    assert total["reasons"]["kept"] == total["kept"]
    assert sum(total["reasons"].values()) == len(candidates), total  # kept, or dropped with a reason

    # the status tells the truth: done only when every request had a usable answer
    state = coscript_run_state(run)
    assert state["outcomes"].get("api_error", 0) == 0
    failed = sum(n for o, n in state["outcomes"].items() if o in USABLE_CALLS and o != "ok")
    assert run.status == ("done" if failed == 0 else "done_with_failures"), (run.status, state["outcomes"])
    for job in (run.goals_job, run.screen_job, run.scripts_job):
        if job is not None:
            assert set(LedgerEntry.objects.filter(run=job.run).values_list("outcome", flat=True)) <= USABLE_CALLS

    capsys.readouterr()
    call_command("coscript_run", "status", "real-coscript")
    status = json.loads(capsys.readouterr().out)
    assert status["status"] == run.status and status["phase"] == "done"
    assert status["report"]["filter"]["total"]["candidates"] == len(candidates)
    assert admin_client_.get(f"/coscript/runs/{run.pk}/").status_code == 200
