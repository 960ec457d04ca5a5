"""Distillation data for a How2Judge-style model (How2Everything App. C.2).

The teacher judge is run twice per example (two judge runs of the same generation run,
sampled with different seeds); an example is kept only when both runs gave a usable
verdict with the same binary label; examples that appear in any human-annotated study are
left out; each kept example becomes a chat-format SFT record: the judge prompt as the user
turn and the teacher's JSON answer as the assistant turn. A summary says what was dropped
and why."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from core.app_errors import InvalidInput
from core.record_output import atomic_output
from judging.models import JudgeRun, Judgment
from judging.prompts import prompt_load
from judging.run_requests import judge_request

# Apps that hold human annotations register a function returning the ids of generations
# that appear in any of their studies (annotate registers one; judging never imports it).
_EXCLUSIONS: list[Callable[[], Iterable[int]]] = []


def distillation_exclusion_register(provider: Callable[[], Iterable[int]]) -> None:
    if provider not in _EXCLUSIONS:
        _EXCLUSIONS.append(provider)


def human_annotated_generation_ids() -> set[int]:
    ids: set[int] = set()
    for provider in _EXCLUSIONS:
        ids.update(provider())
    return ids


def distillation_export(*, first: JudgeRun, second: JudgeRun, output: str | Path) -> dict:
    if first.generation_run_id != second.generation_run_id:
        raise InvalidInput(fields={"second": "the two judge runs must judge the same generation run"})
    if first.pk == second.pk:
        raise InvalidInput(fields={"second": "give two different judge runs of the teacher"})
    prompt = prompt_load(first.prompt_file, kind="how2score_judge")
    second_labels = dict(Judgment.objects.filter(run=second).values_list("generation_id", "has_failure"))
    excluded = human_annotated_generation_ids()
    dropped: Counter[str] = Counter()
    kept = 0
    with atomic_output(output) as handle:
        for judgment in Judgment.objects.filter(run=first).select_related("generation__procedure").order_by("id"):
            generation = judgment.generation
            other = second_labels.get(generation.pk, "missing")
            if judgment.has_failure is None:
                dropped["first run has no usable verdict"] += 1
            elif other == "missing":
                dropped["not judged by the second run"] += 1
            elif other is None:
                dropped["second run has no usable verdict"] += 1
            elif other != judgment.has_failure:
                dropped["the two runs disagree"] += 1
            elif generation.pk in excluded:
                dropped["appears in a human-annotated study"] += 1
            else:
                procedure = generation.procedure
                request = judge_request(procedure.goal, procedure.steps, generation.predicted_steps, prompt)
                answer = {"reasoning": judgment.reasoning, "critical_failures": judgment.critical_failures}
                record = {
                    "messages": request.messages
                    + [{"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)}],
                    "source_example_id": procedure.source_example_id,
                    "model": generation.model,
                    "teacher": first.judge,
                    "has_failure": judgment.has_failure,
                }
                handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
                kept += 1
    return {
        "kept": kept,
        "dropped": dict(dropped),
        "n_first": kept + sum(dropped.values()),
        "prompt_hash": prompt.sha256,
        "output": str(output),
    }
