"""Demo CoScript run: the specific goals and scripts printed in the CoScript paper (Yuan et
al. 2023, Tables 15-18; demo/SOURCES.md), filtered by the real filter on the bundled
embedding model, so a new user sees kept and dropped scripts at once."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from coscript.models import CandidateScript, CoScriptRun, Phase, SpecificGoal
from coscript.phase_services import _goal_key, coscript_run_filter
from judging.models import LanguageModel, RunStatus
from mining.embeddings import EmbeddingModelUnavailable

DEMO_FILE = settings.BASE_DIR / "demo" / "data" / "coscript.json"


def load() -> str:
    data = json.loads(DEMO_FILE.read_text(encoding="utf-8"))
    if CoScriptRun.objects.filter(name=data["run"]).exists():
        return "CoScript demo run already loaded"
    with transaction.atomic():
        model, _ = LanguageModel.objects.get_or_create(name=data["model"])
        run = CoScriptRun.objects.create(
            name=data["run"], language_model=model, k=1, screen=False, phase=Phase.FILTER, status=RunStatus.RUNNING
        )
        n_goals = n_scripts = 0
        for block in data["abstract_goals"]:
            for constraint_type, constraint, specific_goal, steps in block["goals"]:
                goal = SpecificGoal.objects.create(
                    run=run,
                    abstract_goal=block["abstract_goal"],
                    topic=block["topic"],
                    constraint_type=constraint_type,
                    constraint=constraint,
                    specific_goal=specific_goal,
                    goal_key=_goal_key(specific_goal),
                    provenance={"demo_source": f"CoScript {block['source']}"},
                )
                n_goals += 1
                if steps:
                    CandidateScript.objects.create(
                        goal=goal,
                        index=0,
                        outcome="ok",
                        steps=steps,
                        completion="\n".join(f"{n}. {step}" for n, step in enumerate(steps, start=1)),
                        provenance={"demo_source": f"CoScript {block['source']}"},
                    )
                    n_scripts += 1
    try:
        coscript_run_filter(run=run)
    except EmbeddingModelUnavailable as exc:  # the run page offers the filter again
        CoScriptRun.objects.filter(pk=run.pk).update(status=RunStatus.PAUSED, pause_reason=str(exc))
        return f"CoScript demo run: {n_goals} specific goals, {n_scripts} scripts (not filtered: {exc})"
    CoScriptRun.objects.filter(pk=run.pk).update(status=RunStatus.DONE, finished_at=timezone.now())
    return f"CoScript demo run: {n_goals} specific goals, {n_scripts} scripts, filtered"
