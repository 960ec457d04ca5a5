"""Import and export of generations and judgments in the JSONL shapes of `bench_metrics`
and `bench_aggregate`, so results from elsewhere can be judged and compared.

Generations: ``{"source_example_id", "topic", "goal", "steps" (reference), "resources",
"model", "predicted_steps", "model_completion"}``; on import ``predicted_steps`` may be
absent (then parsed from ``model_completion``). Judgments: ``{"source_example_id", "topic",
"model", "judge", "has_failure", "critical_failures", "reasoning"}``; on import
``judge_completion`` (the raw answer) may replace ``has_failure``; a critical failure may
only link steps that exist (L1 1..len(reference steps), L2 1..len(predicted steps)). Imports
are all or nothing and name file, line and field on the first bad record. Files are read
within the ``RECORD_MAX_...`` limits, and every value is checked against the column it goes
to (length, NUL characters, JSON values) before anything is written or looked up."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.db import models, transaction

from judging.how2score import JudgeAnswerError, parse_judge_answer, validate_judge_answer
from judging.models import Generation, GenerationRun, Judgment, LanguageModel, RunStatus
from judging.steps import parse_steps
from judging.tokens import procedure_tokens
from core.stored_values import StrictJSONError, check_stored_values
from core.strict_json import nesting_depth
from mining.models import Procedure
from mining.record_files import RecordFileError, atomic_output, iter_records
from mining.services import record_read_limits

IMPORTED_PROMPT = "(imported)"


def _storable(path, position, model: type[models.Model], values: dict[str, Any], labels: dict[str, str] | None = None) -> None:
    """Refuse, as a file-line-field error, a value that ``model``'s column could not hold."""
    try:
        check_stored_values(model, values, labels=labels)
    except StrictJSONError as exc:
        raise RecordFileError(path, position, exc.message, exc.field) from exc


def _name(path, position, value: Any, field: str, hint: str) -> str:
    if not value or not isinstance(value, str):
        raise RecordFileError(path, position, f"missing or not a string; {hint}", field)
    return value


def _procedure(path, position, record: dict[str, Any]) -> Procedure:
    source_id = record.get("source_example_id")
    if source_id is None or str(source_id) == "":
        raise RecordFileError(path, position, "missing", "source_example_id")
    if isinstance(source_id, bool) or not isinstance(source_id, (str, int)):
        raise RecordFileError(path, position, "must be a string", "source_example_id")
    goal = record.get("goal")
    if goal is not None and not isinstance(goal, str):
        raise RecordFileError(path, position, "must be a string", "goal")
    _storable(path, position, Procedure, {"source_example_id": str(source_id), "goal": goal})
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
    try:
        check_stored_values(GenerationRun, {"name": run_name})
    except StrictJSONError as exc:
        raise ValueError(f"run name: {exc.message}") from exc
    if GenerationRun.objects.filter(name=run_name).exists():
        raise ValueError(f"a generation run named {run_name!r} exists already")
    rows = []
    for position, record in iter_records(path, record_read_limits()):
        name = _name(path, position, model or record.get("model"), "model", "give it in the file or with --model")
        _storable(path, position, LanguageModel, {"name": name}, {"name": "model"})
        procedure = _procedure(path, position, record)
        steps = record.get("predicted_steps")
        completion = record.get("model_completion") or ""
        if steps is None:
            if not isinstance(completion, str) or not completion.strip():
                raise RecordFileError(path, position, "give predicted_steps or model_completion", "predicted_steps")
            steps = parse_steps(completion)
        if not isinstance(steps, list) or not all(isinstance(s, str) and s.strip() for s in steps):
            raise RecordFileError(path, position, "must be a list of non-empty strings", "predicted_steps")
        if not isinstance(completion, str):
            raise RecordFileError(path, position, "must be a string", "model_completion")
        _storable(path, position, Generation, {"predicted_steps": steps, "model_completion": completion})
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
    limits = record_read_limits()
    for position, record in iter_records(path, limits):
        name = _name(path, position, judge or record.get("judge"), "judge", "give it in the file or with --judge")
        _storable(path, position, Judgment, {"judge": name})
        procedure = _procedure(path, position, record)
        model = record.get("model")
        if model is not None and not isinstance(model, str):
            raise RecordFileError(path, position, "must be a string", "model")
        _storable(path, position, Generation, {"model": model})
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
            completion = record["judge_completion"]
            if not isinstance(completion, str):
                raise RecordFileError(path, position, "must be a string", "judge_completion")
            if nesting_depth(completion) > limits.max_json_depth:
                raise RecordFileError(path, position, limits.too_deep(), "judge_completion")
            try:
                answer = parse_judge_answer(completion)
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
        _storable(path, position, Judgment, {"critical_failures": failures, "reasoning": reasoning},
                  {"critical_failures": "critical_failures" if "has_failure" in record else "judge_completion",
                   "reasoning": "reasoning" if "has_failure" in record else "judge_completion"})
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
