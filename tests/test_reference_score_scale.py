"""One How2Score scale in every machine output: ``how2score`` on 0-1 and
``how2score_percent`` on 0-100 (the reference's summary.json names), intervals as ``ci95``
(0-1) and ``ci95_percent`` (0-100). For one judged world the leaderboard API, the judge-run
API, ``bench_run status`` and ``bench_aggregate`` on the exported judgments give the same
numbers, equal to the ones counted by hand; a topic with nothing scored is null with
n_judged 0 everywhere."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from core.intervals import wilson_interval
from judging.models import Generation, GenerationRun, JudgeRun, Judgment, LanguageModel
from mining.models import Procedure, Topic

pytestmark = pytest.mark.django_db

STEPS = ["Gather the tools.", "Do the main part.", "Check the result.", "Clean up.", "Put things away."]
JUDGE = "scale-judge"
# Per topic: the verdicts of the 7 judged generations (True: has_failure, False: no_failure,
# None: the judge's answer could not be read). "Pets" has nothing scored.
VERDICTS: dict[str, list[bool | None]] = {
    "Food & Dining": [False, False, True, False, None, True, False],
    "Pets": [None, None],
    "Travel": [False, True, True, False, False],
}
# By hand: Food 4 of 6 scored pass, Travel 3 of 5: 7 passes of 11 scored, 3 unusable.
N_PASS, N_SCORED, N_UNUSABLE = 7, 11, 3
BY_TOPIC = {"Food & Dining": (4, 6, 1), "Pets": (0, 0, 2), "Travel": (3, 5, 0)}  # passes, scored, unusable


@pytest.fixture
def world():
    model = LanguageModel.objects.create(name="scale-model")
    generation_run = GenerationRun.objects.create(name="scale-gen", language_model=model)
    run = JudgeRun.objects.create(name="scale-judge-run", generation_run=generation_run, judge=JUDGE)
    ids = []
    for t, (topic_name, verdicts) in enumerate(VERDICTS.items()):
        topic, _ = Topic.objects.get_or_create(name=topic_name, defaults={"slug": f"scale-topic-{t}"})
        for i, verdict in enumerate(verdicts):
            procedure = Procedure.objects.create(
                topic=topic,
                goal=f"{topic_name} task {i}",
                steps=STEPS,
                split="bench",
                source_example_id=f"scale-{t}-{i}",
            )
            ids.append(procedure.pk)
            generation = Generation.objects.create(
                procedure=procedure, run=generation_run, model=model.name, predicted_steps=STEPS
            )
            Judgment.objects.create(
                generation=generation,
                run=run,
                judge=JUDGE,
                has_failure=verdict,
                outcome="ok" if verdict is not None else "parse_failed",
                reasoning="Read it.",
                critical_failures=[{"failure": "Wrong.", "L1_steps": [1], "L2_steps": [2]}] if verdict else [],
            )
    generation_run.procedure_ids = ids
    generation_run.save()
    return run


def _interval(passes: int, scored: int) -> tuple[list[float] | None, list[float] | None]:
    interval = wilson_interval(passes, scored)
    return (list(interval), [100 * x for x in interval]) if interval else (None, None)


def _check(estimate: dict, passes: int, scored: int, where: str) -> None:
    """``estimate`` states How2Score on both scales and its interval on both scales."""
    if scored:
        assert estimate["how2score"] == pytest.approx(passes / scored), where
        assert estimate["how2score_percent"] == pytest.approx(100 * passes / scored), where
    else:  # the one rule: nothing scored, no score
        assert estimate["how2score"] is None and estimate["how2score_percent"] is None, where
    ci95, ci95_percent = _interval(passes, scored)
    if "ci95" in estimate:
        assert estimate["ci95"] == (None if ci95 is None else pytest.approx(ci95)), where
        assert estimate["ci95_percent"] == (None if ci95 is None else pytest.approx(ci95_percent)), where


def _check_topics(by_topic: dict, where: str) -> None:
    assert set(by_topic) == set(BY_TOPIC), where
    for topic, (passes, scored, unusable) in BY_TOPIC.items():
        got = by_topic[topic]
        _check(got, passes, scored, f"{where} {topic}")
        n_judged = got["n_judged"] if "n_judged" in got else got["n_scored"]
        assert (n_judged, got["n_unusable"]) == (scored, unusable), f"{where} {topic}"


def test_the_leaderboard_api_states_both_scales(world, researcher_client):
    body = researcher_client.get("/api/leaderboard", {"judge": JUDGE, "basis": "all", "min_coverage": 0}).json()
    (row,) = body["rows"]
    _check(row, N_PASS, N_SCORED, "leaderboard row")
    _check(row["all_items"], N_PASS, N_SCORED, "leaderboard all_items")
    assert (row["n_judged"], row["n_unusable"]) == (N_SCORED, N_UNUSABLE)
    _check_topics(row["by_topic"], "leaderboard by_topic")


def test_the_judge_run_api_and_bench_run_status_state_both_scales(world, researcher_client):
    detail = researcher_client.get(f"/api/judging/judge-runs/{world.pk}/").json()
    listed = researcher_client.get("/api/judging/judge-runs/").json()["results"][0]
    out = io.StringIO()
    call_command("bench_run", "status", world.name, stdout=out)
    status = json.loads(out.getvalue())
    for where, score in (
        ("api detail", detail["how2score"]),
        ("api list", listed["how2score"]),
        ("bench_run status", status["how2score"]),
    ):
        _check(score, N_PASS, N_SCORED, where)
        assert (score["n_judged"], score["n_unusable"]) == (N_SCORED, N_UNUSABLE), where
        _check_topics(score["by_topic"], where)


def test_bench_aggregate_on_the_exported_judgments_gives_the_same_numbers(world, researcher_client, tmp_path):
    path = tmp_path / "judgments.jsonl"
    call_command("bench_transfer", "export-judgments", "--judge", JUDGE, "--output", str(path), stdout=io.StringIO())
    out = io.StringIO()
    call_command("bench_aggregate", "--judgments", str(path), stdout=out, stderr=io.StringIO())
    aggregate = json.loads(out.getvalue())
    _check(aggregate, N_PASS, N_SCORED, "bench_aggregate")
    assert (aggregate["n_judged"], aggregate["n_parse_failed"]) == (N_SCORED, N_UNUSABLE)
    _check_topics(aggregate["by_topic"], "bench_aggregate by_topic")
    (row,) = researcher_client.get("/api/leaderboard", {"judge": JUDGE, "basis": "all", "min_coverage": 0}).json()[
        "rows"
    ]
    assert (row["how2score"], row["how2score_percent"]) == (
        pytest.approx(aggregate["how2score"]),
        pytest.approx(aggregate["how2score_percent"]),
    )


def test_the_comparison_api_gives_the_difference_on_both_scales(world, researcher_client):
    other = Generation.objects.filter(judgments__judge=JUDGE).order_by("id")
    for generation in other:  # a second model that passes everything it was judged on
        twin = Generation.objects.create(procedure=generation.procedure, model="scale-other", predicted_steps=STEPS)
        Judgment.objects.create(generation=twin, judge=JUDGE, has_failure=False, outcome="ok")
    body = researcher_client.get(
        "/api/leaderboard/compare", {"judge": JUDGE, "a": "scale-model", "b": "scale-other", "resamples": 200}
    ).json()
    assert body["n_items"] == N_SCORED
    assert body["difference"] == pytest.approx(N_PASS / N_SCORED - 1.0)
    assert body["difference_percent"] == pytest.approx(100 * (N_PASS / N_SCORED - 1.0))
    assert body["ci95_percent"] == pytest.approx([100 * x for x in body["ci95"]])
    _check(body["a"], N_PASS, N_SCORED, "comparison a")
    _check(body["b"], N_SCORED, N_SCORED, "comparison b")
