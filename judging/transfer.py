"""Import and export of generations and judgments in the JSONL shapes of `bench_metrics`
and `bench_aggregate`, so results from elsewhere can be judged and compared.

Generations: ``{"source_example_id", "topic", "goal", "steps" (reference), "resources",
"model", "predicted_steps", "model_completion"}``; on import ``predicted_steps`` may be
absent (then parsed from ``model_completion``). Judgments: ``{"source_example_id", "topic",
"model", "judge", "has_failure", "critical_failures", "reasoning"}``; on import
``judge_completion`` (the raw answer) may replace ``has_failure``; a critical failure may
only link steps that exist (L1 1..len(reference steps), L2 1..len(predicted steps)). Imports
are all or nothing and name file, line and field on the first bad record."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.db import transaction

from judging.how2score import JudgeAnswerError, parse_judge_answer, validate_judge_answer
from judging.models import Generation, GenerationRun, Judgment, LanguageModel, RunStatus
from judging.steps import parse_steps
from judging.tokens import procedure_tokens
from mining.models import Procedure
from mining.record_files import RecordFileError, atomic_output, iter_records

IMPORTED_PROMPT = "(imported)"


def _procedure(path, position, record: dict[str, Any]) -> Procedure:
    source_id = record.get("source_example_id")
    if source_id is None or str(source_id) == "":
        raise RecordFileError(path, position, "missing", "source_example_id")
    candidates = Procedure.objects.filter(source_example_id=str(source_id))
    if record.get("goal"):
        candidates = candidates.filter(goal=record["goal"]) or candidates
    procedure = candidates.order_by("id").first()
    if procedure is None:
        raise RecordFileError(path, position, f"no procedure with source_example_id {source_id!r}; import the procedures first",
                              "source_example_id")
    return procedure


@transaction.atomic
def generations_import(*, path: str | Path, run_name: str, model: str | None = None) -> GenerationRun:
    """Store a file of generations as a finished generation run named ``run_name``."""
    if GenerationRun.objects.filter(name=run_name).exists():
        raise ValueError(f"a generation run named {run_name!r} exists already")
    rows = []
    for position, record in iter_records(path):
        name = model or record.get("model")
        if not name or not isinstance(name, str):
            raise RecordFileError(path, position, "missing; give it in the file or with --model", "model")
        procedure = _procedure(path, position, record)
        steps = record.get("predicted_steps")
        completion = record.get("model_completion") or ""
        if steps is None:
            if not isinstance(completion, str) or not completion.strip():
                raise RecordFileError(path, position, "give predicted_steps or model_completion", "predicted_steps")
            steps = parse_steps(completion)
        if not isinstance(steps, list) or not all(isinstance(s, str) and s.strip() for s in steps):
            raise RecordFileError(path, position, "must be a list of non-empty strings", "predicted_steps")
        rows.append((name, procedure, steps, completion))
    if not rows:
        raise RecordFileError(path, None, "the file holds no generations")
    models = {name for name, *_ in rows}
    if len(models) > 1:
        raise RecordFileError(path, None, f"one run holds one model; the file has {', '.join(sorted(models))}", "model")
    language_model, _ = LanguageModel.objects.get_or_create(name=models.pop())
    run = GenerationRun.objects.create(name=run_name, language_model=language_model, split="bench",
                                       prompt_file=IMPORTED_PROMPT, prompt_hash="", status=RunStatus.DONE,
                                       procedure_ids=[p.pk for _, p, _, _ in rows])
    seen = set()
    generations = []
    for name, procedure, steps, completion in rows:
        if procedure.pk in seen:
            continue
        seen.add(procedure.pk)
        generations.append(Generation(procedure=procedure, run=run, model=name, predicted_steps=steps,
                                      model_completion=completion, gen_tokens=procedure_tokens(steps),
                                      provenance={"imported_from": str(path)}))
    Generation.objects.bulk_create(generations)
    return run


@transaction.atomic
def judgments_import(*, path: str | Path, judge: str | None = None) -> int:
    """Attach a file of judge labels to stored generations (matched by source id and model)."""
    created = 0
    for position, record in iter_records(path):
        name = judge or record.get("judge")
        if not name:
            raise RecordFileError(path, position, "missing; give it in the file or with --judge", "judge")
        procedure = _procedure(path, position, record)
        model = record.get("model")
        generations = Generation.objects.filter(procedure=procedure)
        if model:
            generations = generations.filter(model=model)
        generation = generations.select_related("procedure").order_by("-id").first()
        if generation is None:
            raise RecordFileError(path, position, f"no generation of {model or 'any model'} for this procedure", "model")
        outcome, label, failures, reasoning = "ok", None, [], ""
        # Links may only name steps that exist, as in a judge run.
        counts = {"n_l1": len(generation.procedure.steps), "n_l2": len(generation.predicted_steps)}
        if "has_failure" in record:
            if not isinstance(record["has_failure"], bool):
                raise RecordFileError(path, position, "must be true or false", "has_failure")
            label = record["has_failure"]
            failures = record.get("critical_failures") or []
            if failures:
                try:
                    failures = validate_judge_answer({"reasoning": "", "critical_failures": failures},
                                                     **counts)["critical_failures"]
                except JudgeAnswerError as exc:
                    raise RecordFileError(path, position, exc.detail, exc.field) from exc
        elif "judge_completion" in record:
            try:
                answer = parse_judge_answer(record["judge_completion"])
            except JudgeAnswerError as exc:  # an unreadable answer is the judge's failure: kept as such
                outcome, reasoning = "parse_failed", str(exc)
            else:
                try:  # a readable answer linking missing steps is a broken file: refused
                    answer = validate_judge_answer(answer, **counts)
                except JudgeAnswerError as exc:
                    raise RecordFileError(path, position, exc.detail, "judge_completion" + (f".{exc.field}" if exc.field else "")) from exc
                failures, reasoning, label = answer["critical_failures"], answer["reasoning"], bool(answer["critical_failures"])
        else:
            raise RecordFileError(path, position, "give has_failure or judge_completion", "has_failure")
        if Judgment.objects.filter(generation=generation, judge=name).exists():
            raise RecordFileError(path, position, f"generation already judged by {name!r}; judgments are never overwritten", "judge")
        Judgment.objects.create(generation=generation, judge=name, outcome=outcome, has_failure=label,
                                critical_failures=failures, reasoning=reasoning, provenance={"imported_from": str(path)})
        created += 1
    return created


def generations_export(*, run: GenerationRun, output: str | Path) -> int:
    count = 0
    with atomic_output(output) as handle:
        for g in run.generations.select_related("procedure__topic").order_by("id"):
            p = g.procedure
            record = {"source_example_id": p.source_example_id, "topic": p.topic.name, "goal": p.goal, "steps": p.steps,
                      "resources": p.resources, "model": g.model, "outcome": g.outcome,
                      "predicted_steps": g.predicted_steps, "model_completion": g.model_completion}
            handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            count += 1
    return count


def judgments_export(*, judge: str, output: str | Path, run: GenerationRun | None = None) -> int:
    count = 0
    judgments = Judgment.objects.filter(judge=judge).select_related("generation__procedure__topic").order_by("id")
    if run is not None:
        judgments = judgments.filter(generation__run=run)
    with atomic_output(output) as handle:
        for j in judgments:
            p = j.generation.procedure
            record = {"source_example_id": p.source_example_id, "topic": p.topic.name, "model": j.generation.model,
                      "judge": j.judge, "outcome": j.outcome, "has_failure": j.has_failure,
                      "critical_failures": j.critical_failures, "reasoning": j.reasoning}
            if j.has_failure is None:  # bench_aggregate counts it as unusable
                record.pop("has_failure")
                record["judge_completion"] = ""
            handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            count += 1
    return count
