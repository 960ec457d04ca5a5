"""Import of judgments: each record of a file of judge labels (How2Bench's
``how2bench.judgment.v1``, or a file of ``has_failure`` or ``judge_completion`` records)
attached to the one stored generation it identifies — by ``--run`` / ``--model`` (or a
``model`` field), or by the procedure and the judged ``predicted_steps`` — never to an
arbitrary one. The record shapes and the checks every import shares are in
judging/transfer.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import transaction

from core.record_files import ReadLimits, RecordError
from core.record_reader import iter_records
from core.strict_json import nesting_depth
from judging.how2score import JudgeAnswerError, check_has_failure_agrees, parse_judge_answer, validate_judge_answer
from judging.models import Generation, GenerationRun, Judgment
from judging.transfer import (
    UNUSABLE_OUTCOMES,
    check_storable,
    judgment_record,
    kept_fields,
    record_name,
    record_procedure,
)
from mining.models import Procedure
from mining.procedure_services import record_read_limits


@transaction.atomic
def judgments_import(
    *, path: str | Path, judge: str | None = None, run: GenerationRun | None = None, model: str | None = None
) -> int:
    """Attach a file of judge labels to stored generations: each record to the one
    generation it identifies (see ``_generation``), never to an arbitrary one."""
    created = 0
    limits = record_read_limits()
    for position, record in iter_records(path, limits):
        value, judge_field = _judge_name(record, judge)
        name = record_name(path, position, value, judge_field, "give it in the file or with --judge")
        check_storable(path, position, Judgment, {"judge": name}, {"judge": judge_field})
        generation = _judged_generation(path, position, record, run, model)
        labels = _judge_labels(path, position, record, generation, limits)
        _imported_judgment(path, position, record, generation, name, labels).save()
        created += 1
    return created


# What a judgment record says: (outcome, has_failure, critical failures, reasoning).
JudgeLabels = tuple[str, bool | None, list[Any], str]


def _judged_generation(
    path: str | Path, position: str, record: dict[str, Any], run: GenerationRun | None, model: str | None
) -> Generation:
    """The stored generation a judgment record judges (``model``, when given, over the record's)."""
    procedure = record_procedure(path, position, record)
    record_model = model or record.get("model")
    if record_model is not None and not isinstance(record_model, str):
        raise RecordError(path, position, "model", "must be a string")
    check_storable(path, position, Generation, {"model": record_model})
    return _generation(path, position, record, procedure, run, record_model)


def _judge_labels(
    path: str | Path, position: str, record: dict[str, Any], generation: Generation, limits: ReadLimits
) -> JudgeLabels:
    """What a judgment record says of ``generation``: from its fields (``has_failure``, or
    ``parse_failed``) or from the judge's completion, read as a judge run reads one."""
    # Links may only name steps that exist, as in a judge run.
    counts: dict[str, int] = {"n_l1": len(generation.procedure.steps), "n_l2": len(generation.predicted_steps)}
    parse_failed = record.get("parse_failed", False)
    if not isinstance(parse_failed, bool):
        raise RecordError(path, position, "parse_failed", "must be true or false")
    if record.get("reasoning") is not None and not isinstance(record["reasoning"], str):
        raise RecordError(path, position, "reasoning", "must be a string")
    if "has_failure" in record or parse_failed:
        return _labels_from_fields(path, position, record, counts, parse_failed)
    if "judge_completion" in record:
        return _labels_from_completion(path, position, record, counts, limits)
    raise RecordError(path, position, "has_failure", "give has_failure or judge_completion")


def _labels_from_fields(
    path: str | Path, position: str, record: dict[str, Any], counts: dict[str, int], parse_failed: bool
) -> JudgeLabels:
    """A record's ``has_failure``, ``critical_failures`` and ``reasoning`` as its judge wrote
    them; a ``parse_failed`` record is counted as unusable, never scored."""
    if not isinstance(record.get("has_failure", True), bool):
        raise RecordError(path, position, "has_failure", "must be true or false")
    raw_failures = record.get("critical_failures") or []
    try:  # a judgment file records what its judge wrote: empty texts and step 0 pass
        failures = validate_judge_answer(
            {"reasoning": "", "critical_failures": raw_failures},
            imported=True,
            n_l1=counts["n_l1"],
            n_l2=counts["n_l2"],
        )["critical_failures"]
    except JudgeAnswerError as exc:
        raise RecordError(path, position, exc.field, exc.detail) from exc
    try:  # has_failure means at least one failure (§4.2); parse_failed records excepted
        check_has_failure_agrees(record)
    except RecordError as exc:
        raise exc.at(path, position) from exc
    reasoning = record.get("reasoning") or ""
    if parse_failed:  # the judge's answer was unreadable: counted as unusable, never scored
        outcome = str(record["outcome"]) if record.get("outcome") in UNUSABLE_OUTCOMES else "parse_failed"
        return outcome, None, failures, reasoning
    return "ok", record["has_failure"], failures, reasoning


def _labels_from_completion(
    path: str | Path, position: str, record: dict[str, Any], counts: dict[str, int], limits: ReadLimits
) -> JudgeLabels:
    """A record's ``judge_completion`` read as a judge run reads an answer: an unreadable one
    is the judge's failure (``parse_failed``), a readable one linking missing steps a broken file."""
    completion = record["judge_completion"]
    if not isinstance(completion, str):
        raise RecordError(path, position, "judge_completion", "must be a string")
    if nesting_depth(completion) > limits.max_json_depth:
        raise RecordError(path, position, "judge_completion", limits.too_deep())
    try:
        answer = parse_judge_answer(completion)
    except JudgeAnswerError as exc:  # an unreadable answer is the judge's failure: kept as such
        return "parse_failed", None, [], str(exc)
    try:  # a readable answer linking missing steps is a broken file: refused
        answer = validate_judge_answer(answer, n_l1=counts["n_l1"], n_l2=counts["n_l2"])
    except JudgeAnswerError as exc:
        raise RecordError(
            path, position, "judge_completion" + (f".{exc.field}" if exc.field else ""), exc.detail
        ) from exc
    return "ok", bool(answer["critical_failures"]), answer["critical_failures"], answer["reasoning"]


def _imported_judgment(
    path: str | Path, position: str, record: dict[str, Any], generation: Generation, name: str, labels: JudgeLabels
) -> Judgment:
    """The judgment (not saved) of ``generation`` by the judge ``name``, with its provenance;
    refused when each of its values could not be stored, or the generation is already judged
    by that judge."""
    outcome, label, failures, reasoning = labels
    check_storable(
        path,
        position,
        Judgment,
        {"critical_failures": failures, "reasoning": reasoning},
        {
            "critical_failures": "critical_failures" if "judge_completion" not in record else "judge_completion",
            "reasoning": "reasoning" if "judge_completion" not in record else "judge_completion",
        },
    )
    if Judgment.objects.filter(generation=generation, judge=name).exists():
        raise RecordError(
            path, position, "judge", f"generation already judged by {name!r}; judgments are never overwritten"
        )
    judgment = Judgment(
        generation=generation,
        judge=name,
        outcome=outcome,
        has_failure=label,
        critical_failures=failures,
        reasoning=reasoning,
    )
    kept = kept_fields(record, judgment_record(judgment))
    judgment.provenance = {"imported_from": str(path), **({"record": kept} if kept else {})}
    check_storable(path, position, Judgment, {"provenance": judgment.provenance}, {"provenance": "record"})
    return judgment


def _generation(
    path, position, record: dict[str, Any], procedure: Procedure, run: GenerationRun | None, model: str | None
) -> Generation:
    """The one generation a judgment record is about: of ``run`` and ``model`` when given,
    and when several remain, the one whose steps are the record's ``predicted_steps``."""
    generations = Generation.objects.filter(procedure=procedure)
    if run is not None:
        generations = generations.filter(run=run)
    if model:
        generations = generations.filter(model=model)
    found = list(generations.select_related("procedure__topic", "run").order_by("id"))
    steps = _steps_key(record.get("predicted_steps"))
    if len(found) > 1 and steps is not None:
        found = [g for g in found if _steps_key(g.predicted_steps) == steps] or found
    where = "".join([f" in run {run.name!r}" if run is not None else "", f" of model {model!r}" if model else ""])
    if not found:
        raise RecordError(
            path,
            position,
            "model" if model or run else "source_example_id",
            f"no generation of this procedure{where}; import the generations first",
        )
    if len(found) > 1:
        names = ", ".join(sorted({f"{g.model} ({g.run.name if g.run else 'no run'})" for g in found}))
        raise RecordError(
            path,
            position,
            "model",
            f"{len(found)} generations of this procedure{where} could be meant ({names}); give --run or --model",
        )
    return found[0]


def _judge_name(record: dict[str, Any], judge: str | None) -> tuple[Any, str]:
    """The judge a judgment record names: --judge, its ``judge`` field when a string, or the
    model of its judge info (``judge.model`` of a how2bench.judgment.v1 record)."""
    if judge:
        return judge, "judge"
    value = record.get("judge")
    if isinstance(value, dict):
        return value.get("model"), "judge.model"
    return value, "judge"


def _steps_key(steps: Any) -> list[str] | None:
    """Steps as a judge saw them (stripped, empty ones left out), to match a judgment's
    ``predicted_steps`` with a stored generation's."""
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        return None
    return [s.strip() for s in steps if s.strip()]
