"""Import and export of generations and judgments in the JSONL shapes of `bench_metrics`
and `bench_aggregate`, so results from elsewhere can be judged and compared.

Both travel in How2Bench's record schemas (``how2bench.generation.v1``,
``how2bench.judgment.v1``: generator / judge info, prompt hashes, the prompt, reasoning,
``n_failures``, ``parse_failed``), read and written losslessly: every field of an imported
record that the product does not hold in a column, or holds differently, is kept in the
row's provenance (``record``) and written back on export. Judgments are attached to the
generation their record identifies — by ``--run`` / ``--model`` (or a ``model`` field),
or by the procedure and the judged ``predicted_steps`` — and a record that fits no
generation, or more than one, is refused with file, line and field.

Generations: ``{"source_example_id", "topic", "goal", "steps" (reference), "resources",
"model", "predicted_steps", "model_completion"}``; on import ``predicted_steps`` may be
absent (then parsed from ``model_completion``). Judgments: ``{"source_example_id", "topic",
"model", "judge", "has_failure", "critical_failures", "reasoning"}``; on import
``judge_completion`` (the raw answer) may replace ``has_failure``; ``has_failure`` must
agree with ``critical_failures``, ``n_failures`` and a readable ``judge_completion`` where
they are given (§4.2), except in a ``parse_failed`` record, which the reference writes as
``has_failure: true`` with no failures and which is stored as unusable; a critical failure may
only link steps that exist (L1 1..len(reference steps), L2 1..len(predicted steps)). Imports
are all or nothing and name file, line and field on the first bad record. Files are read
within the ``RECORD_MAX_...`` limits, and every value is checked against the column it goes
to (length, NUL characters, JSON values) before anything is written or looked up. Judgments
are imported by judging/judgment_import.py, with the checks above."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.db import models, transaction

from core.app_errors import Conflict, InvalidInput
from core.record_files import RecordError
from core.record_output import atomic_output
from core.record_reader import iter_records
from core.stored_values import StrictJSONError, check_stored_values
from judging.models import Generation, GenerationRun, Judgment, LanguageModel, RunStatus, StepParser
from judging.reference_outputs import RunIdentity, generation_identity, judge_identity
from judging.steps import steps_parse
from judging.tokens import procedure_tokens
from llm.models import LedgerEntry
from mining.models import Procedure
from mining.procedure_records import NO_TOPIC
from mining.procedure_services import record_read_limits

IMPORTED_PROMPT = "(imported)"


def check_storable(
    path, position, model: type[models.Model], values: dict[str, Any], labels: dict[str, str] | None = None
) -> None:
    """Refuse, as a file-line-field error, a value that ``model``'s column could not hold."""
    try:
        check_stored_values(model, values, labels=labels)
    except StrictJSONError as exc:
        raise RecordError(path, position, exc.field, exc.message) from exc


def record_name(path, position, value: Any, field: str, hint: str) -> str:
    """The name (of a model, of a judge) a record gives in ``field``; refused with ``hint`` when missing."""
    if not value or not isinstance(value, str):
        raise RecordError(path, position, field, f"missing or not a string; {hint}")
    return value


def record_procedure(path, position, record: dict[str, Any]) -> Procedure:
    """The stored procedure a record is about, by its ``source_example_id`` (and its ``goal``
    where several procedures share that id)."""
    source_id = record.get("source_example_id")
    if source_id is None or str(source_id) == "":
        raise RecordError(path, position, "source_example_id", "missing")
    if isinstance(source_id, bool) or not isinstance(source_id, (str, int)):
        raise RecordError(path, position, "source_example_id", "must be a string")
    goal = record.get("goal")
    if goal is not None and not isinstance(goal, str):
        raise RecordError(path, position, "goal", "must be a string")
    check_storable(path, position, Procedure, {"source_example_id": str(source_id), "goal": goal})
    candidates = Procedure.objects.filter(source_example_id=str(source_id))
    if record.get("goal"):
        candidates = candidates.filter(goal=record["goal"]) or candidates
    procedure = candidates.order_by("id").first()
    if procedure is None:
        raise RecordError(
            path,
            position,
            "source_example_id",
            f"no procedure with source_example_id {source_id!r}; import the procedures first",
        )
    return procedure


GENERATION_SCHEMA_VERSION = "how2bench.generation.v1"
JUDGMENT_SCHEMA_VERSION = "how2bench.judgment.v1"
UNUSABLE_OUTCOMES = ("parse_failed", "refused", "truncated", "too_long")


def kept_fields(record: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
    """The fields of an imported record an export would not write back as they are."""
    return {key: value for key, value in record.items() if key not in written or written[key] != value}


def _with_kept(written: dict[str, Any], provenance: dict[str, Any]) -> dict[str, Any]:
    return {**written, **(provenance or {}).get("record", {})}


def _model_name(record: dict[str, Any], model: str | None) -> tuple[Any, str]:
    """The model a generation record names: --model, its ``model`` field, or its
    generator's model (``generator.model`` of a how2bench.generation.v1 record)."""
    if model:
        return model, "model"
    if record.get("model") is not None:
        return record["model"], "model"
    generator = record.get("generator")
    if isinstance(generator, dict):
        return generator.get("model"), "generator.model"
    return None, "model"


def generation_record(
    generation: Generation,
    *,
    prompt: str = "",
    model_id: str | None = None,
    identity: RunIdentity | None = None,
) -> dict[str, Any]:
    """One generation in the ``how2bench.generation.v1`` shape (with ``model`` and
    ``outcome`` beside), the fields of the record it was imported from written back.
    ``prompt``: the prompt that was sent; ``model_id``: the model the endpoint was asked
    (``generator.model``, as the reference writes it; default: the generation's model name);
    ``identity``: a run started from a reference configuration (judging/reference_outputs.py)
    writes the reference's ``generator_id``, ``generator.backend`` and ``generator.provider``;
    any other run writes its executor as the backend and no provider or id."""
    p, run = generation.procedure, generation.run
    written = {
        "schema_version": GENERATION_SCHEMA_VERSION,
        "generator_id": identity.identity if identity else "",
        "generation_prompt_sha256": run.prompt_hash if run is not None else "",
        "source_example_id": p.source_example_id,
        "topic": "" if p.topic.name == NO_TOPIC else p.topic.name,
        "goal": p.goal,
        "steps": p.steps,
        "resources": p.resources,
        "model_completion": generation.model_completion,
        "predicted_steps": generation.predicted_steps,
        "prompt": prompt,
        "generator": {
            "backend": identity.settings["backend"] if identity else (run.executor if run is not None else ""),
            "provider": identity.settings["provider"] if identity else "",
            "model": model_id or generation.model,
        },
        "model": generation.model,
        "outcome": generation.outcome,
    }
    return _with_kept(written, generation.provenance)


def judgment_record(judgment: Judgment, *, identity: RunIdentity | None = None) -> dict[str, Any]:
    """One judgment in the ``how2bench.judgment.v1`` shape (with ``model`` and ``outcome``
    beside). An answer that could not be used is ``parse_failed: true`` with
    ``has_failure: true``, as the reference writes it (its aggregate leaves it out).
    ``identity``: a judge run started from a reference configuration writes the reference's
    ``judge_id``, ``judge.backend`` and ``judge.provider``; ``judge.model`` is the judge's
    name here either way (what ``import-judgments`` reads back)."""
    g = judgment.generation
    p, run = g.procedure, judgment.run
    usable = judgment.outcome == "ok" and judgment.has_failure is not None
    written = {
        "schema_version": JUDGMENT_SCHEMA_VERSION,
        "judge_id": identity.identity if identity else "",
        "judge_prompt_sha256": run.prompt_hash if run is not None else "",
        "source_example_id": p.source_example_id,
        "topic": "" if p.topic.name == NO_TOPIC else p.topic.name,
        "goal": p.goal,
        "steps": p.steps,
        "resources": p.resources,
        "predicted_steps": g.predicted_steps,
        "judge": {
            "backend": identity.settings["backend"] if identity else (run.executor if run is not None else ""),
            "provider": identity.settings["provider"] if identity else "",
            "model": judgment.judge,
        },
        "reasoning": judgment.reasoning,
        "critical_failures": judgment.critical_failures,
        "has_failure": bool(judgment.has_failure) if usable else True,
        "n_failures": len(judgment.critical_failures),
        "parse_failed": not usable,
        "model": g.model,
        "outcome": judgment.outcome,
    }
    return _with_kept(written, judgment.provenance)


@transaction.atomic
def generations_import(
    *, path: str | Path, run_name: str, model: str | None = None, step_parser: str | None = None
) -> GenerationRun:
    """Store a file of generations as a finished generation run named ``run_name``. A
    record without ``predicted_steps`` has its ``model_completion`` parsed by
    ``step_parser`` (judging/steps.py; default ours); the run records that parser, or
    ``file`` when every record gave its steps."""
    parser = step_parser or StepParser.PRODUCT
    if parser not in (StepParser.PRODUCT, StepParser.REFERENCE):
        raise InvalidInput(fields={"step_parser": f"must be product or reference, got {parser!r}"})
    parsed_any = False
    try:
        check_stored_values(GenerationRun, {"name": run_name})
    except StrictJSONError as exc:
        raise InvalidInput(fields={"run_name": exc.message}) from exc
    if GenerationRun.objects.filter(name=run_name).exists():
        raise Conflict(fields={"run_name": f"a generation run named {run_name!r} exists already"})
    rows = []
    for position, record in iter_records(path, record_read_limits()):
        value, field = _model_name(record, model)
        name = record_name(path, position, value, field, "give it in the file or with --model")
        check_storable(path, position, LanguageModel, {"name": name}, {"name": field})
        procedure = record_procedure(path, position, record)
        steps = record.get("predicted_steps")
        completion = record.get("model_completion") or ""
        if steps is None:
            if not isinstance(completion, str) or not completion.strip():
                raise RecordError(path, position, "predicted_steps", "give predicted_steps or model_completion")
            steps = steps_parse(completion, parser=parser)
            parsed_any = True
        if not isinstance(steps, list) or not all(isinstance(s, str) and s.strip() for s in steps):
            raise RecordError(path, position, "predicted_steps", "must be a list of non-empty strings")
        if not isinstance(completion, str):
            raise RecordError(path, position, "model_completion", "must be a string")
        prompt_hash = record.get("generation_prompt_sha256")
        if prompt_hash is not None and not isinstance(prompt_hash, str):
            raise RecordError(path, position, "generation_prompt_sha256", "must be a string")
        check_storable(path, position, Generation, {"predicted_steps": steps, "model_completion": completion})
        rows.append((name, procedure, steps, completion, record, position))
    if not rows:
        raise RecordError(path, None, None, "the file holds no generations")
    models = {name for name, *_ in rows}
    if len(models) > 1:
        raise RecordError(path, None, "model", f"one run holds one model; the file has {', '.join(sorted(models))}")
    hashes = {r.get("generation_prompt_sha256") or "" for *_, r, _ in rows}
    prompt_hash = hashes.pop() if len(hashes) == 1 else ""
    language_model, _ = LanguageModel.objects.get_or_create(name=models.pop())
    run = GenerationRun.objects.create(
        name=run_name,
        language_model=language_model,
        split="bench",
        prompt_file=IMPORTED_PROMPT,
        prompt_hash=prompt_hash[:64],
        status=RunStatus.DONE,
        procedure_ids=[p.pk for _, p, *_ in rows],
        step_parser=parser if parsed_any else StepParser.FILE,
    )
    seen = set()
    generations = []
    for name, procedure, steps, completion, record, position in rows:
        if procedure.pk in seen:
            continue
        seen.add(procedure.pk)
        generation = Generation(
            procedure=procedure,
            run=run,
            model=name,
            predicted_steps=steps,
            model_completion=completion,
            gen_tokens=procedure_tokens(steps),
        )
        kept = kept_fields(record, generation_record(generation))
        generation.provenance = {"imported_from": str(path), **({"record": kept} if kept else {})}
        check_storable(path, position, Generation, {"provenance": generation.provenance}, {"provenance": "record"})
        generations.append(generation)
    Generation.objects.bulk_create(generations)
    return run


def _request_text(request: dict[str, Any]) -> str:
    """The prompt a request sent: a plain completion's prompt, else its (last) user message."""
    if request.get("prompt") is not None:
        return str(request["prompt"])
    users = [m for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""


def generation_run_sent(run: GenerationRun) -> tuple[dict[str, str], dict[str, str]]:
    """What a generation run sent, by ledger key: the prompt of each of its requests (from
    its LLM job) and the model each answer came from (the ledger's entry, i.e. the model id
    the endpoint was asked, which a run of the role's own model does not name itself)."""
    job = run.llm_job
    if job is None:
        return {}, {}
    prompts = {key: _request_text(request) for key, request in zip(job.keys or [], job.requests or [])}
    models = dict(LedgerEntry.objects.filter(key__in=list(prompts)).values_list("key", "model"))
    return prompts, models


def generations_export(*, run: GenerationRun, output: str | Path) -> int:
    """A run's generations as ``how2bench.generation.v1`` records, each with the prompt it
    was sent and the model id that answered (``generation_run_sent``); an imported
    generation writes back what its record said."""
    count = 0
    prompts, models = generation_run_sent(run)
    fallback_model = run.language_model.model or None
    identity = generation_identity(run)
    with atomic_output(output) as handle:
        for g in run.generations.select_related("procedure__topic", "run").order_by("id"):
            key = (g.provenance or {}).get("ledger_key")
            if key is None:  # imported: its record's fields are written back
                record = generation_record(g)
            else:
                record = generation_record(
                    g, prompt=prompts.get(key, ""), model_id=models.get(key) or fallback_model, identity=identity
                )
            handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            count += 1
    return count


def judgments_export(*, judge: str, output: str | Path, run: GenerationRun | None = None) -> int:
    count = 0
    judgments = (
        Judgment.objects.filter(judge=judge).select_related("generation__procedure__topic", "run").order_by("id")
    )
    if run is not None:
        judgments = judgments.filter(generation__run=run)
    identities: dict[int, RunIdentity | None] = {}
    with atomic_output(output) as handle:
        for j in judgments:
            if j.run is not None and j.run.pk not in identities:
                identities[j.run.pk] = judge_identity(j.run)
            identity = identities.get(j.run.pk) if j.run is not None else None
            handle.write((json.dumps(judgment_record(j, identity=identity), ensure_ascii=False) + "\n").encode("utf-8"))
            count += 1
    return count
