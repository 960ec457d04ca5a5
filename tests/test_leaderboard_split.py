"""The constrained slice end to end: a generation run on split "constrained" (procedures with
no resources, as CoScript adds them) and a judge run against the scripted server, then the
leaderboard and cross-judge pages by split: a constrained run's judgments count in the
constrained and all-splits views and never in How2Bench's."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from judging.cross_judge_selectors import cross_judge_rankings
from judging.forms import GenerationRunForm
from judging.leaderboard_selectors import leaderboard
from judging.selectors import judged_splits
from judging.services import (
    generation_run_create,
    generation_run_execute,
    judge_run_create,
    judge_run_execute,
    language_model_register,
)
from mining.models import Procedure, Split, Topic
from tests.scripted_llm import Reply, ScriptedLLM, last_user_message

pytestmark = pytest.mark.django_db(transaction=True)

CONSTRAINED_GOALS = [
    # (goal, reference steps): specific goals of the kind CoScript writes (Yuan et al. 2023, Table 1).
    (
        "Make a cake for diabetics",
        ["Mix flour, eggs and a sugar substitute.", "Pour the batter into a tin.", "Bake for 30 minutes."],
    ),
    (
        "Make a chocolate cake in a microwave",
        ["Mix flour, cocoa, egg and milk in a mug.", "Microwave the mug for 90 seconds.", "Let it cool for a minute."],
    ),
]


def _steps_answer(body):
    import re

    n = int(re.findall(r"Exactly (\d+) steps", last_user_message(body))[-1])
    return Reply("\n".join(f"{i}. Do part {i} of the task." for i in range(1, n + 1)), completion_tokens=8 * n)


def _judge_answer(body):
    text = body["messages"][0]["content"]
    if "diabetics" in text:  # the generic steps never honour the constraint
        return Reply(
            json.dumps(
                {
                    "reasoning": "No sugar substitute.",
                    "critical_failures": [
                        {"failure": "Ignores the diabetic constraint.", "L1_steps": [1], "L2_steps": [1]}
                    ],
                }
            )
        )
    return Reply(json.dumps({"reasoning": "Equivalent.", "critical_failures": []}))


@pytest.fixture
def server(settings, demo):
    settings.LLM_BACKOFF_BASE_SECONDS = 0.01
    with ScriptedLLM() as scripted:
        roles = dict(settings.LLM_ROLES)
        for role in ("generate", "how2score_judge"):
            roles[role] = {
                "base_url": scripted.base_url,
                "api_key": "k",
                "model": "m",
                "temperature": None,
                "max_tokens": None,
            }
        settings.LLM_ROLES = roles
        scripted.default = lambda body: _judge_answer(body) if body.get("response_format") else _steps_answer(body)
        yield scripted


@pytest.fixture
def constrained():
    topic = Topic.objects.get(name="Food & Dining")
    return [
        Procedure.objects.create(
            topic=topic,
            goal=goal,
            steps=steps,
            resources=[],
            split=Split.CONSTRAINED,
            source_example_id=f"coscript:1:{n}",
        )
        for n, (goal, steps) in enumerate(CONSTRAINED_GOALS, start=1)
    ]


def _run(model, split, judges=("how2judge",)):
    run = generation_run_create(name=f"{model.name}-{split}", language_model=model, split=split, start=False)
    assert generation_run_execute(run_id=run.pk) == "done"
    for judge in judges:
        judge_run = judge_run_create(name=f"{model.name}-{split}-{judge}", generation_run=run, judge=judge, start=False)
        assert judge_run_execute(run_id=judge_run.pk) == "done"
    run.refresh_from_db()
    return run


def _by_model(rows):
    return {r["model"]: r for r in rows}


def test_a_generation_run_on_the_constrained_split_prompts_with_no_resources(server, constrained):
    form = GenerationRunForm(
        data={
            "name": "qwen-constrained",
            "language_model": language_model_register(name="qwen3-8b", prompt_style="inst").pk,
            "split": "constrained",
            "seed": 0,
            "executor": "online",
            "concurrency": 4,
        }
    )
    assert form.is_valid(), form.errors
    run = _run(form.cleaned_data["language_model"], form.cleaned_data["split"])
    assert run.split == "constrained" and sorted(run.procedure_ids) == sorted(p.pk for p in constrained)
    prompts = [last_user_message(body) for body in server.chat_requests() if not body.get("response_format")]
    assert len(prompts) == 2
    # An empty resource list is written "[]", the rendering every generation prompt uses
    # (How2Mine's resource lists may be empty, How2Everything §3); the judge prompt shows none.
    for prompt in prompts:
        assert "\nResources:\n[]\n\nExactly 3 steps" in prompt
    judged = [body["messages"][0]["content"] for body in server.chat_requests() if body.get("response_format")]
    assert len(judged) == 2 and all("Resources" not in text for text in judged)


def test_constrained_judgments_count_in_the_constrained_and_all_views_only(server, constrained):
    both = language_model_register(name="qwen3-8b", prompt_style="inst")
    only = language_model_register(name="olmo-3-7b", prompt_style="inst")
    _run(both, "bench")
    _run(both, "constrained")
    _run(only, "constrained")
    assert judged_splits("how2judge") == ["bench", "constrained"]

    slice_ = _by_model(leaderboard("how2judge", "constrained"))
    assert set(slice_) == {"qwen3-8b", "olmo-3-7b"}
    # Two constrained procedures, the diabetic one judged a failure: How2Score 50.
    assert slice_["qwen3-8b"]["n"] == 2 and slice_["qwen3-8b"]["how2score"] == pytest.approx(0.5)
    assert slice_["qwen3-8b"]["how2score_percent"] == pytest.approx(50.0)
    bench = _by_model(leaderboard("how2judge", "bench"))
    assert set(bench) == {"qwen3-8b"} and bench["qwen3-8b"]["n"] == 17
    everything = _by_model(leaderboard("how2judge"))
    assert everything["qwen3-8b"]["n"] == 19 and everything["olmo-3-7b"]["n"] == 2


def test_the_leaderboard_page_offers_the_judged_splits_and_names_the_slice(server, constrained, researcher_client):
    _run(language_model_register(name="qwen3-8b", prompt_style="inst"), "bench")
    _run(language_model_register(name="olmo-3-7b", prompt_style="inst"), "constrained")
    url = reverse("leaderboard")
    html = researcher_client.get(url, {"judge": "how2judge", "split": "constrained"}).content.decode()
    assert "<title>Leaderboard (the constrained slice (CoScript))" in html
    assert '<h1 id="leaderboard-heading">Leaderboard: Constrained (CoScript)</h1>' in html
    assert '<option value="constrained" selected>Constrained (CoScript)</option>' in html
    assert "olmo-3-7b" in html and "qwen3-8b" not in html
    select = html[html.index('<select id="split"') : html.index("</select>", html.index('<select id="split"'))]
    # how2judge judged a bench run and a constrained run: "All splits" and those two.
    assert select.count("<option") == 3 and 'value="bench"' in select and 'value="train"' not in select
    assert f"{reverse('cross_judge')}?split=constrained" in html

    html = researcher_client.get(url, {"judge": "how2judge", "split": "bench"}).content.decode()
    assert '<h1 id="leaderboard-heading">How2Bench leaderboard</h1>' in html
    assert "qwen3-8b" in html and "olmo-3-7b" not in html

    html = researcher_client.get(url, {"judge": "how2judge"}).content.decode()
    assert "Leaderboard: all splits" in html and '<option value="" selected>All splits</option>' in html
    assert "qwen3-8b" in html and "olmo-3-7b" in html


def test_an_unknown_split_is_named_and_all_splits_are_shown(server, constrained, researcher_client):
    _run(language_model_register(name="olmo-3-7b", prompt_style="inst"), "constrained")
    # how2judge judged no How2Bench generation: "bench" is not among its splits.
    response = researcher_client.get(reverse("leaderboard"), {"judge": "how2judge", "split": "bench"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "This judge has judged nothing of a split named “bench”; showing all splits." in html
    assert "Leaderboard: all splits" in html and "olmo-3-7b" in html


def test_cross_judge_rankings_by_split(server, constrained, researcher_client):
    _run(language_model_register(name="qwen3-8b", prompt_style="inst"), "bench", judges=("how2judge", "gpt-5"))
    _run(language_model_register(name="olmo-3-7b", prompt_style="inst"), "constrained", judges=("how2judge", "gpt-5"))
    rankings = cross_judge_rankings(["how2judge", "gpt-5"], "constrained")
    assert rankings["models"] == ["olmo-3-7b"] and rankings["scores"]["gpt-5"] == {"olmo-3-7b": 0.5}
    assert rankings["estimates"]["gpt-5"]["olmo-3-7b"]["how2score_percent"] == 50.0
    assert cross_judge_rankings(["how2judge", "gpt-5"])["models"] == ["olmo-3-7b", "qwen3-8b"]
    html = researcher_client.get(
        reverse("cross_judge"), {"judge": ["how2judge", "gpt-5"], "split": "constrained"}
    ).content.decode()
    assert "Cross-judge robustness: the constrained slice (CoScript)" in html
    assert "olmo-3-7b" in html and "qwen3-8b" not in html
    html = researcher_client.get(reverse("cross_judge"), {"split": "nonsense"}).content.decode()
    assert "No judge has judged anything of a split named “nonsense”; showing all splits." in html
