"""Services that start the runs of a bench configuration in the reference CLI's shape
(translated by judging/reference_configs.py): its ``inputs`` imported as bench procedures,
one generation run per listed model, a judge run per generation run (or for the existing
``paths.generations`` file), and the generations and judgments files written where the
reference writes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from core.app_errors import InvalidInput
from core.reference_configs import short_name
from judging.models import GenerationRun, JudgeRun
from judging.reference_outputs import (
    GENERATION_MANIFEST,
    JUDGE_MANIFEST,
    aggregate_write,
    generation_folder,
    generation_identity,
    judge_folder_name,
    judge_identity,
    manifest_write,
)
from judging.services import (
    generation_run_create,
    judge_run_create,
    language_model_register,
    run_name_check,
)
from judging.transfer import generations_export, generations_import, judgments_export
from mining.procedure_services import procedure_import


@dataclass(frozen=True)
class InputsImport:
    lines: list[str]
    # The inputs' procedures, in file order; None when the configuration names no inputs.
    procedure_ids: list[int] | None


def reference_inputs_import(*, config: dict[str, Any]) -> InputsImport:
    """Import the ``inputs`` files as bench procedures (known ones are kept as they are)."""
    lines: list[str] = []
    paths = config["reference"]["inputs"] or []
    procedure_ids: list[int] = []
    for path in paths:
        result = procedure_import(path=path, split="bench", create_topics=True, collect_ids=True)
        lines.append(f"inputs {path}: {result.created} new procedure(s), {result.existing} known")
        procedure_ids += result.procedure_ids
    return InputsImport(lines=lines, procedure_ids=list(dict.fromkeys(procedure_ids)) if paths else None)


@transaction.atomic
def reference_generation_runs_create(
    *,
    config: dict[str, Any],
    start: bool,
    procedure_ids: list[int] | None = None,
) -> list[GenerationRun]:
    """One generation run per model of the configuration; all or nothing. With the ids of
    the configuration's ``inputs``, each run generates for exactly those procedures (as the
    reference generates for its input dataset), not for the whole bench split."""
    if config["reference"]["generations_file"]:
        raise InvalidInput("paths.generations names existing generations: judge them with bench_run judge --config")
    if not config["generations"]:
        raise InvalidInput("models: no model listed to generate with")
    for run in config["generations"]:
        run_name_check(run_class=GenerationRun, name=run["name"])
    runs = []
    for run in config["generations"]:
        model = language_model_register(**run["model"])
        created = generation_run_create(
            name=run["name"],
            language_model=model,
            executor=run["executor"],
            prompt_file=run.get("prompt_file"),
            options=run["options"],
            start=start,
            procedure_ids=procedure_ids,
            **config["own"],
        )
        _settings_keep(created, run.get("reference_settings"))
        runs.append(created)
    return runs


def _settings_keep(run: GenerationRun | JudgeRun, settings: dict[str, Any] | None) -> None:
    """The settings the reference resolves the run's configuration to, kept on the run for
    its ids, records and manifests (judging/reference_outputs.py)."""
    if settings:
        run.reference_settings = settings
        run.save(update_fields=["reference_settings"])


def _generation_runs_to_judge(config: dict[str, Any]) -> list[GenerationRun]:
    path = config["reference"]["generations_file"]
    if path:
        name = config["reference"]["imported_run"]
        existing = GenerationRun.objects.filter(name=name).first()
        if existing is None:
            return [generations_import(path=path, run_name=name, step_parser=config["own"].get("step_parser"))]
        first = existing.generations.order_by("id").first()
        if first is None or first.provenance.get("imported_from") != path:
            raise InvalidInput(f"a generation run named {name!r} exists already and was not imported from {path}")
        return [existing]  # imported before: judged again by another judge, never twice by one
    if not config["generations"]:
        raise InvalidInput(
            "nothing to judge: list the generators under models (generated with bench_run generate "
            "--config) or give paths.generations"
        )
    runs = []
    for run in config["generations"]:
        found = GenerationRun.objects.filter(name=run["name"]).first()
        if found is None:
            raise InvalidInput(
                f"no generation run named {run['name']!r}: run bench_run generate --config with this file first"
            )
        runs.append(found)
    return runs


def judge_run_name(generation_run: GenerationRun, judge: str) -> str:
    return f"{generation_run.name}--{short_name(judge)}"


@transaction.atomic
def reference_judge_runs_create(*, config: dict[str, Any], start: bool) -> list[JudgeRun]:
    """A judge run with the configuration's evaluator for each generation run it names."""
    judge = config["judge"]
    generation_runs = _generation_runs_to_judge(config)
    for generation_run in generation_runs:
        run_name_check(run_class=JudgeRun, name=judge_run_name(generation_run, judge["judge"]))
    own = {k: v for k, v in config["own"].items() if k in ("concurrency", "budget_usd")}
    runs = []
    for generation_run in generation_runs:
        run = judge_run_create(
            name=judge_run_name(generation_run, judge["judge"]),
            generation_run=generation_run,
            judge=judge["judge"],
            role=judge["role"],
            model=judge["model"],
            executor=judge["executor"],
            prompt_file=judge.get("prompt_file"),
            options=judge["options"],
            start=start,
            **own,
        )
        _settings_keep(run, judge.get("reference_settings"))
        runs.append(run)
    return runs


def reference_generations_write(*, config: dict[str, Any], run: GenerationRun) -> list[str]:
    """``out_root/<run_name>_<generator_id>/generations.jsonl`` and its
    ``generation_manifest.json``, as the reference lays a model's outputs out; returns the
    files written."""
    folder = generation_folder(config["reference"]["out_root"], run)
    output = folder / "generations.jsonl"
    output.parent.mkdir(parents=True, exist_ok=True)
    generations_export(run=run, output=output)
    written = [str(output)]
    identity = generation_identity(run)
    if identity is not None:
        written.append(manifest_write(folder / GENERATION_MANIFEST, identity.manifest))
    return written


def reference_judgments_write(*, config: dict[str, Any], run: JudgeRun) -> list[str]:
    """``paths.judgments``, else ``judgments/<short judge model>_<judge_id>/judgments.jsonl``
    under the generation run's folder (``out_root/<run_name>_<generator_id>``), or under
    ``out_root`` itself when the generations came from ``paths.generations`` (as the
    reference's ``h2e bench judge`` writes them); ``judge_manifest.json`` beside it, and
    ``aggregate/summary.json`` and ``aggregate/by_topic.csv`` with the numbers
    ``bench_aggregate`` gives for the file written (``aggregate_write``). Returns the files
    written."""
    given = config["reference"]["judgments_file"]
    if given:
        output = Path(given)
    else:
        out_root = Path(config["reference"]["out_root"])
        parent = (
            out_root if config["reference"]["generations_file"] else generation_folder(out_root, run.generation_run)
        )
        output = parent / "judgments" / judge_folder_name(run) / "judgments.jsonl"
    output.parent.mkdir(parents=True, exist_ok=True)
    judgments_export(judge=run.judge, run=run.generation_run, output=output)
    written = [str(output)]
    identity = judge_identity(run)
    if identity is not None:
        written.append(manifest_write(output.parent / JUDGE_MANIFEST, identity.manifest))
    return written + aggregate_write(output)
