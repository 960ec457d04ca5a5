"""What a run started from a reference CLI bench configuration writes as the reference does:
its identity (``generator_id`` / ``judge_id``, ``backend``, ``provider``; the pure rules
are judging/reference_identity.py), the folders named after it, and the manifests and the
aggregate beside the record files. Every value comes from the run: the settings its
configuration resolved to when it was created (``reference_settings``), the prompt file it
read and that file's SHA-256, the model its requests were answered by (the ledger's
entries) and, for the aggregate, the judgments file as written."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.record_files import RecordError
from core.record_output import atomic_output
from core.record_reader import iter_records
from judging.how2score import judgments_tally
from judging.models import GenerationRun, JudgeRun
from judging.reference_identity import (
    AGGREGATE_BY_TOPIC,
    AGGREGATE_FOLDER,
    AGGREGATE_SUMMARY,
    GENERATION_MANIFEST,
    JUDGE_MANIFEST,
    aggregate_summary,
    aggregate_topic_csv,
    aggregate_topic_rows,
    generation_manifest,
    judge_dir_name,
    judge_manifest,
)
from llm.models import LedgerEntry
from mining.procedure_records import NO_TOPIC


@dataclass(frozen=True)
class RunIdentity:
    """A run's identity as the reference writes it: the settings hashed (with the model its
    requests were answered by), the id, and the manifest."""

    settings: dict[str, Any]
    identity: str
    manifest: dict[str, Any]


def _asked_model(run: GenerationRun | JudgeRun) -> str | None:
    """The one model the run's answers came from (the ledger's entries); None when it has
    no answer yet, or answers from several models."""
    job = run.llm_job
    if job is None or not job.keys:
        return None
    models = set(LedgerEntry.objects.filter(key__in=list(job.keys)).values_list("model", flat=True).distinct())
    models.discard("")
    return models.pop() if len(models) == 1 else None


def _identity(run: GenerationRun | JudgeRun, build, id_field: str) -> RunIdentity | None:
    if not run.reference_settings:
        return None
    settings = dict(run.reference_settings)
    # The reference records the prompt file it read; a run that fell back to the product's
    # prompt (no file of the reference's in the working directory) records the file it read.
    prompt_path = settings.pop("prompt_path", None) or run.prompt_file
    settings["model"] = _asked_model(run) or settings["model"]
    manifest = build(settings, prompt_sha256=run.prompt_hash, prompt_path=prompt_path)
    return RunIdentity(settings=settings, identity=manifest[id_field], manifest=manifest)


def generation_identity(run: GenerationRun) -> RunIdentity | None:
    """A generation run's ``generator_id`` and ``generation_manifest.json``; None for a run
    not started from a reference configuration."""
    return _identity(run, generation_manifest, "generator_id")


def judge_identity(run: JudgeRun) -> RunIdentity | None:
    """A judge run's ``judge_id`` and ``judge_manifest.json``; None for a run not started
    from a reference configuration."""
    return _identity(run, judge_manifest, "judge_id")


def generation_folder(out_root: str | Path, run: GenerationRun) -> Path:
    """``out_root/<run_name>_<generator_id>``, the reference's folder of a model's outputs
    (``out_root/<run_name>`` for a run without a reference identity)."""
    identity = generation_identity(run)
    return Path(out_root) / (f"{run.name}_{identity.identity}" if identity else run.name)


def judge_folder_name(run: JudgeRun) -> str:
    """``<short model>_<judge_id>`` (the judge's name for a run without a reference identity)."""
    from core.reference_configs import short_name

    identity = judge_identity(run)
    if identity is None:
        return short_name(run.judge)
    return judge_dir_name(identity.settings["model"], identity.identity)


def manifest_write(path: Path, manifest: dict[str, Any]) -> str:
    """A manifest (or ``summary.json``) as the reference writes one: indented JSON, text
    beyond ASCII kept."""
    with atomic_output(path) as handle:
        handle.write((json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    return str(path)


def aggregate_write(judgments: str | Path) -> list[str]:
    """``aggregate/summary.json`` and ``aggregate/by_topic.csv`` beside a judgments file, as
    the reference writes them after judging, with the numbers ``bench_aggregate`` prints for
    that file: the file is read back and tallied by the same function
    (``judgments_tally``), so the two cannot disagree. Returns the files written."""
    judgments = Path(judgments)
    try:
        result = judgments_tally(iter_records(judgments)).reference_result()
    except RecordError as exc:
        raise RecordError(judgments, exc.line, exc.field, exc.message) from exc
    folder = judgments.parent / AGGREGATE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    summary = manifest_write(folder / AGGREGATE_SUMMARY, aggregate_summary(result))
    by_topic = folder / AGGREGATE_BY_TOPIC
    with atomic_output(by_topic) as handle:
        handle.write(aggregate_topic_csv(aggregate_topic_rows(result, no_topic=NO_TOPIC)).encode("utf-8"))
    return [summary, str(by_topic)]


__all__ = [
    "GENERATION_MANIFEST",
    "JUDGE_MANIFEST",
    "RunIdentity",
    "aggregate_write",
    "generation_folder",
    "generation_identity",
    "judge_folder_name",
    "judge_identity",
    "manifest_write",
]
