"""Launching How2Bench runs from a YAML configuration's text: one service for ``bench_run``
and the REST API, so a file gives the same runs (and the same refusals) by either path.

* ``bench_generate_launch``: generation runs from a configuration in our shape (one run) or
  in the reference CLI's shape (one run per listed model; judging/reference_configs.py);
* ``bench_judge_launch``: judge runs, likewise;
* ``components_launch``: a SCORE components run of a generation run.

Each launch is all or nothing (one transaction: a refusal leaves no run and no registered
model behind) and enqueues the runs' Celery tasks once it commits (``start``). The
reference shape may name files on the server (``inputs``, ``paths.generations``); a caller
that must not read the server's files (the API) passes ``server_files=False`` and such a
configuration is refused with the key that names them."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.db import transaction

from core.run_configs import RunConfigError, config_parse
from core.stored_values import max_length_of
from judging.models import ComponentsRun, GenerationRun, LanguageModel
from judging.reference_runs import (
    reference_generation_runs_create,
    reference_inputs_import,
    reference_judge_runs_create,
)
from judging.run_configs import generation_config_parse, judge_config_parse, reference_bench_config_parse
from judging.score_services import components_run_create
from judging.services import generation_run_create, judge_run_create, language_model_register, run_name_check
from llm.constants import EXECUTORS
from llm.endpoint_services import base_url_problem
from llm.key_env import api_key_env_problem

NAME_MAX = max_length_of(GenerationRun, "name")
COMPONENTS_KEYS = {"generation_run", "name", "prompt_file", "executor", "concurrency", "budget_usd"}


@dataclass
class BenchLaunch:
    """The runs a configuration started, what was said on the way (the reference
    translation's notes, the inputs imported) and, for the reference shape, its translation
    (whose output files ``bench_run --wait`` writes)."""

    runs: list[Any]
    notes: list[str] = field(default_factory=list)
    reference: dict[str, Any] | None = None
    procedure_ids: list[int] | None = None


def _check_name(value: Any, source: str, key: str = "name") -> None:
    """A run's name: text of at most NAME_MAX characters (the column's size)."""
    if not isinstance(value, str) or not value.strip():
        raise RunConfigError(f"{source}: {key} must be a non-empty text, got {value!r}")
    if len(value) > NAME_MAX:
        raise RunConfigError(f"{source}: {key} is longer than {NAME_MAX} characters")


# The fields of a registered model a run configuration may give (judging/run_configs.py MODEL_KEYS).
MODEL_FIELDS = ("role", "base_url", "model", "api_key_env", "prompt_style", "reasoning", "max_tokens")


def language_model_resolve(*, name: str, registering: dict[str, Any], source: str) -> LanguageModel:
    """The registered model ``name`` of a run configuration; with endpoint fields (``model``
    given as a mapping), registered or updated with them first, every field not given keeping
    its stored value. A bare name that is not registered is refused: a typo must not register
    a model (nor reset one's endpoint to the defaults)."""
    existing = LanguageModel.objects.filter(name=name).first()
    problem = base_url_problem(registering["base_url"]) if registering.get("base_url") else None
    if problem is not None:
        raise RunConfigError(f"{source}: model.base_url {problem}, got {registering['base_url']!r}"[:300])
    problem = api_key_env_problem(str(registering.get("api_key_env") or ""))
    if problem is not None:
        raise RunConfigError(f"{source}: model.api_key_env: {problem}"[:300])
    if registering:
        fields: dict[str, Any] = {f: getattr(existing, f) for f in MODEL_FIELDS} if existing else {}
        fields.update(registering)
        return language_model_register(name=name, **fields)
    if existing is None:
        known = ", ".join(LanguageModel.objects.order_by("name").values_list("name", flat=True)[:20]) or "none yet"
        raise RunConfigError(
            f"{source}: model: no registered language model named {name!r} (registered: {known}); "
            "give model as a mapping with base_url and model to register it"
        )
    return existing


@transaction.atomic
def bench_generate_launch(
    *, config_text: str, source: str, start: bool = True, base_dir: Path | None = None, server_files: bool = True
) -> BenchLaunch:
    """Generation runs from a configuration (module docstring)."""
    reference = reference_bench_config_parse(config_text, source=source, base_dir=base_dir, server_files=server_files)
    if reference is not None:
        notes = [f"note: {note}" for note in reference["reference"]["notes"]]
        inputs = reference_inputs_import(config=reference)
        runs = reference_generation_runs_create(config=reference, start=start, procedure_ids=inputs.procedure_ids)
        return BenchLaunch(
            runs=runs, notes=notes + inputs.lines, reference=reference, procedure_ids=inputs.procedure_ids
        )
    config = generation_config_parse(config_text, source=source)
    _check_name(config["name"], source)
    _check_name(config["model"]["name"], source, "model")
    run_name_check(run_class=GenerationRun, name=config["name"])  # before the model is (re)registered
    fields = dict(config.pop("model"))
    name = fields.pop("name")
    model = language_model_resolve(name=name, registering=fields, source=source)
    return BenchLaunch(runs=[generation_run_create(language_model=model, start=start, **config)])


@transaction.atomic
def bench_judge_launch(
    *, config_text: str, source: str, start: bool = True, base_dir: Path | None = None, server_files: bool = True
) -> BenchLaunch:
    """Judge runs from a configuration (module docstring)."""
    reference = reference_bench_config_parse(config_text, source=source, base_dir=base_dir, server_files=server_files)
    if reference is not None:
        notes = [f"note: {note}" for note in reference["reference"]["notes"]]
        lines = reference_inputs_import(config=reference).lines
        return BenchLaunch(
            runs=reference_judge_runs_create(config=reference, start=start), notes=notes + lines, reference=reference
        )
    config = judge_config_parse(config_text, source=source)
    _check_name(config["name"], source)
    name = config.pop("generation_run")
    generation_run = GenerationRun.objects.filter(name=str(name)).first()
    if generation_run is None:
        raise RunConfigError(f"{source}: generation_run: no generation run named {name!r}")
    return BenchLaunch(runs=[judge_run_create(generation_run=generation_run, start=start, **config)])


def components_config_parse(text: str, *, source: str) -> dict[str, Any]:
    """A components run's configuration: ``generation_run`` (its name), and optionally
    ``name``, ``prompt_file``, ``executor``, ``concurrency``, ``budget_usd``."""
    data = config_parse(text, source=source, allowed=COMPONENTS_KEYS, required={"generation_run"})
    for key in ("generation_run", "name"):
        if key in data:
            _check_name(data[key], source, key)
    if data.get("prompt_file") is not None and not isinstance(data["prompt_file"], str):
        raise RunConfigError(f"{source}: prompt_file must be text, got {data['prompt_file']!r}")
    if data.get("executor", "online") not in EXECUTORS:
        raise RunConfigError(f"{source}: executor must be one of {', '.join(EXECUTORS)}, got {data['executor']!r}")
    concurrency = data.get("concurrency", 16)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 1024:
        raise RunConfigError(f"{source}: concurrency must be a whole number from 1 to 1024, got {concurrency!r}")
    return data


@transaction.atomic
def components_launch(*, config_text: str, source: str, start: bool = True) -> ComponentsRun:
    """A SCORE components run from a configuration (``components_config_parse``)."""
    config = components_config_parse(config_text, source=source)
    name = config.pop("generation_run")
    generation_run = GenerationRun.objects.filter(name=name).first()
    if generation_run is None:
        raise RunConfigError(f"{source}: generation_run: no generation run named {name!r}")
    if config.get("name") and ComponentsRun.objects.filter(name=config["name"]).exists():
        raise RunConfigError(f"{source}: name: a components run named {config['name']!r} exists; choose another name")
    budget: Decimal | None = config.pop("budget_usd", None)
    return components_run_create(generation_run=generation_run, budget_usd=budget, start=start, **config)


__all__ = ["BenchLaunch", "bench_generate_launch", "bench_judge_launch", "components_config_parse", "components_launch"]
