"""Writes of mining runs: create, pause, resume, cancel, retry failures, change stages.

The work itself is in ``mining/runner.py``; the Celery task ``mining.run_execute`` calls
``runner.mining_run_execute`` with a run id."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Max

from core.run_configs import RunConfigError
from core.stored_values import StrictJSONError, check_stored_values
from llm.models import LLMJob
from llm.run_lifecycle import owned_run_cancel, owned_run_pause, owned_run_resume, owned_run_retry_failed
from llm.run_models import PAUSED_BY_USER
from llm.services import llm_job_resume
from mining.export_services import procedure_export, reference_shard_path
from mining.models import CandidateStatus, Corpus, MiningCandidate, MiningRun, MiningRunStatus, Topic
from mining.procedure_records import NO_TOPIC
from mining.procedure_services import TopicResolver
from mining.run_configs import mining_config_parse
from mining.run_counters import Budget, documents_reopen, mining_run_corpus_count
from mining.stage_plans import run_uses_waves, stage_endpoint, stage_prompt, stage_sampling
from mining.stages import LLM_STAGES

# Settings a re-launch under the same name may change: how stages are asked, how the run
# executes, and how far sampling may go. The rest decides which documents the run takes.
CHANGEABLE = {
    "stages",
    "min_steps",
    "max_steps",
    "concurrency",
    "workers",
    "budget_usd",
    "failure_retries",
    "candidates_per_topic",
    "desired_valid_per_topic",
    "extract_batch_size",
}
FIXED = {"corpus", "topics", "seed", "executor"}


# The configuration keys stored in MiningRun columns of the same name.
COLUMN_KEYS = (
    "name",
    "candidates_per_topic",
    "desired_valid_per_topic",
    "extract_batch_size",
    "seed",
    "min_steps",
    "max_steps",
    "concurrency",
    "workers",
    "budget_usd",
    "failure_retries",
)


def _check_columns(config: dict[str, Any], source: str) -> None:
    """A value its column cannot hold (``workers: 40000`` in a small integer) is the
    configuration's error, on SQLite as on PostgreSQL (core/stored_values.py)."""
    try:
        check_stored_values(MiningRun, {key: config.get(key) for key in COLUMN_KEYS})
    except StrictJSONError as exc:
        raise RunConfigError(f"{source}: {exc.field} {exc.message}") from exc


def _resolve_stages(config: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """Load every stage's prompt (checked, hashed), resolve its endpoint, so a run that
    cannot start fails here with a clear message instead of in a worker, and its sampling
    parameters (``stage_sampling``: the configuration's, else the role's setting, else the
    built-in), stored in the spec its requests are built from."""
    from llm.endpoints import EndpointNotConfigured, UnknownLLMRole
    from llm.prompts import PromptError

    stages = {}
    for stage in LLM_STAGES:
        spec = dict(config["stages"][stage])
        try:
            prompt = stage_prompt(stage, spec)
            endpoint = stage_endpoint(spec)
        except (PromptError, EndpointNotConfigured, UnknownLLMRole) as exc:
            raise RunConfigError(f"{source}: stages.{stage}: {exc}") from exc
        spec.update(stage_sampling(stage, spec))
        spec.update(
            prompt_file=prompt.path,
            prompt_hash=prompt.sha256,
            resolved_model=endpoint.model,
            resolved_base_url=endpoint.base_url,
        )
        stages[stage] = spec
    return stages


def _topics(corpus: Corpus, wanted: Any, source: str, *, pooled: bool = False) -> list[Topic]:
    if pooled:  # the no-topics mode: its pseudo-topic, and the topic of documents without one
        resolver = TopicResolver(create=True)
        resolver.resolve(NO_TOPIC)
        pooled_topics = [resolver.resolve(name) for name in wanted]
        return [topic for topic in pooled_topics if topic is not None]  # created when missing
    present = Topic.objects.filter(documents__corpus=corpus).distinct().order_by("position", "name")
    if wanted == "all":
        topics = list(present)
        if not topics:
            raise RunConfigError(
                f"{source}: corpus {corpus.name!r} has no documents with a topic; a run samples "
                "documents per topic (import the corpus with --topic-field)"
            )
        return topics
    resolver = TopicResolver(create=False)
    topics = []
    for name in wanted:
        topic = resolver.resolve(name)
        if topic is None:
            raise RunConfigError(f"{source}: topics: unknown topic {name!r} (known: {resolver.known()})")
        topics.append(topic)
    return topics


def _stored_config(config: dict[str, Any], text: str) -> dict[str, Any]:
    """The configuration as the run keeps it (JSON: the budget as text) with the YAML it came from."""
    return {k: (str(v) if k == "budget_usd" and v is not None else v) for k, v in config.items()} | {
        "source_text": text
    }


def _enqueue(run: MiningRun) -> None:
    from mining.tasks import mining_run_execute_task

    tasks = 1 if run_uses_waves(run) else run.workers  # a run in waves is stepped by one task
    transaction.on_commit(lambda: [mining_run_execute_task.delay(run.pk) for _ in range(tasks)])


@transaction.atomic
def mining_run_create(
    *, config_text: str, source: str, corpus_name: str = "", created_by: str = "", start: bool = True
) -> MiningRun:
    """Create a run from a YAML configuration (see ``mining/run_configs.py``)."""
    config = mining_config_parse(config_text, source=source)
    _check_columns(config, source)
    name = corpus_name or config["corpus"]
    if not name:
        raise RunConfigError(f"{source}: no corpus: give --corpus NAME or a corpus key")
    if corpus_name and config["corpus"] and config["corpus"] != corpus_name:
        raise RunConfigError(f"{source}: the file names corpus {config['corpus']!r} but {corpus_name!r} was given")
    corpus = Corpus.objects.filter(name=name).first()
    if corpus is None:
        raise RunConfigError(f"{source}: no corpus named {name!r}")
    if MiningRun.objects.filter(name=config["name"]).exists():
        raise RunConfigError(
            f"{source}: a run named {config['name']!r} exists; change its stages with "
            "mining_run_update_stages (mine_run with the same name) or choose another name"
        )
    topics = _topics(corpus, config["topics"], source, pooled=bool((config.get("reference") or {}).get("pooled")))
    config["corpus"] = corpus.name
    config["max_document_id"] = corpus.documents.aggregate(m=Max("pk"))["m"] or 0
    run = MiningRun.objects.create(
        name=config["name"],
        corpus=corpus,
        candidates_per_topic=config["candidates_per_topic"],
        desired_valid_per_topic=config["desired_valid_per_topic"],
        extract_batch_size=config["extract_batch_size"],
        seed=config["seed"],
        min_steps=config["min_steps"],
        max_steps=config["max_steps"],
        stages=_resolve_stages(config, source),
        executor=config["executor"],
        concurrency=config["concurrency"],
        workers=config["workers"],
        budget_usd=config["budget_usd"],
        failure_retries=config["failure_retries"],
        config=_stored_config(config, config_text),
        created_by=created_by,
    )
    run.topics.set(topics)
    mining_run_corpus_count(run)  # its planned documents' bound, kept (mining/run_counters.py)
    if start:
        _enqueue(run)
    return run


@transaction.atomic
def mining_run_update_stages(*, run: MiningRun, config_text: str, source: str, start: bool = True) -> dict[str, Any]:
    """Apply a changed configuration to an existing run and re-walk its documents: stages
    whose request did not change keep their results, the others (and what follows them,
    where their input changed) run again. Returns what changed and how many documents
    will be walked again."""
    config = mining_config_parse(config_text, source=source)
    _check_columns(config, source)
    run = MiningRun.objects.select_for_update().get(pk=run.pk)
    if run.status == MiningRunStatus.RUNNING:
        raise RunConfigError(f"run {run.name!r} is running; pause it before changing its stages")
    old = run.config
    for key in FIXED:
        if key == "corpus" and not config["corpus"]:
            continue
        if config[key] != old.get(key):
            raise RunConfigError(
                f"{source}: {key} differs from run {run.name!r} ({old.get(key)!r}); "
                "it decides which documents the run takes: start a new run instead"
            )
    stages = _resolve_stages(config, source)
    changed = [s for s in LLM_STAGES if stages[s] != run.stages[s]]
    if (config["min_steps"], config["max_steps"]) != (run.min_steps, run.max_steps):
        changed.append("heuristics")
    for key in CHANGEABLE - {"stages"}:
        setattr(run, key, config[key])
    run.stages = stages
    run.config = {**old, **_stored_config({k: v for k, v in config.items() if k in CHANGEABLE}, config_text)}
    run.status = MiningRunStatus.PENDING
    run.pause_reason = run.error = ""
    run.finished_at = None
    run.save()
    finished = MiningCandidate.objects.select_for_update().filter(run=run).exclude(status=CandidateStatus.PENDING)
    ids = list(finished.values_list("pk", flat=True))
    rewalk = documents_reopen(run=run, ids=ids, failures=0, claim="", claimed_at=None, finished_at=None)
    if start:
        _enqueue(run)
    return {"changed_stages": changed, "documents_rewalked": rewalk}


def mining_run_pause(*, run: MiningRun, reason: str = PAUSED_BY_USER) -> None:
    """Pause a pending or running run: its walks stop at the next document, and the jobs of
    its Batch API wave pause with it (llm/run_lifecycle.py)."""
    owned_run_pause(run, reason=reason)


def mining_run_cancel(*, run: MiningRun) -> None:
    """Cancel a run; the jobs of its Batch API wave stop with it."""
    owned_run_cancel(run)


def _reopen(run: MiningRun, *, budget_usd: Decimal | None = None) -> None:
    """What a resume puts back in the queue: the claims left by a worker that died are
    released, and the jobs of its wave that paused (with the run, or on their own: a budget,
    the circuit breaker) are reopened. A wave job done with failures stays done: its
    documents' failures are the run's, which Retry failed walks again."""
    MiningCandidate.objects.filter(run=run).exclude(claim="").update(claim="", claimed_at=None)
    spent = Budget(run).spent if budget_usd is not None else Decimal(0)
    for job in run.owned_jobs():
        if job.status == LLMJob.Status.PAUSED:
            # A new budget gives the job what the run has left of it (the job's own spending included).
            left = None if budget_usd is None else max(Decimal(0), budget_usd - spent + job.cost_usd)
            llm_job_resume(job=job, budget_usd=left, enqueue=False)


def mining_run_resume(*, run: MiningRun, budget_usd: Decimal | None = None, start: bool = True) -> MiningRun:
    """Put a paused, failed or interrupted run back in the queue. Claims left by a worker
    that died are released; finished stage results and ledger entries are reused."""
    owned_run_resume(
        run,
        enqueue=(lambda: _enqueue(run)) if start else (lambda: None),
        budget_usd=budget_usd,
        reopen=lambda stored: _reopen(stored, budget_usd=budget_usd),
    )
    return MiningRun.objects.get(pk=run.pk)


def _failures_reopen(run: MiningRun) -> int:
    """Retry failed's documents: every one whose stage call failed is walked again (never
    reusing the failed answer), its counts moved back to pending. Returns how many."""
    failed = MiningCandidate.objects.select_for_update().filter(run=run, status=CandidateStatus.FAILED)
    ids = list(failed.values_list("pk", flat=True))
    return documents_reopen(run=run, ids=ids, failures=0, claim="", claimed_at=None, finished_at=None)


def mining_run_retry_failures(*, run: MiningRun, start: bool = True) -> int:
    """Ask again for every document whose stage call failed (never reusing the failed answer)."""
    return owned_run_retry_failed(
        run,
        enqueue=(lambda: _enqueue(run)) if start else (lambda: None),
        failures=_failures_reopen,
        reopen=_reopen,
    )


# --- Configurations in the reference CLI's shape (mining/reference_configs.py) ------------


def mining_reference_inputs_import(*, config: dict[str, Any], corpus_name: str = "") -> str:
    """Import a reference configuration's ``inputs`` as a corpus (named after the run unless
    ``corpus_name`` is given) and return the corpus name. Documents already in it are
    skipped, so launching the same file again adds nothing; a bad row stops the import
    with its file, line and field, and nothing is stored."""
    from mining.corpus_services import CorpusImportFailed, corpus_import
    from mining.document_records import DocumentFields

    inputs = (config.get("reference") or {}).get("inputs")
    name = corpus_name or config.get("corpus") or config["name"]
    if not inputs:
        return name
    try:
        corpus_import(
            name=name,
            path=inputs["path"],
            fields=DocumentFields(**inputs["fields"]),
            include=inputs["include"] or None,
            create_topics=True,
            fixed_topic=inputs["fixed_topic"],
        )
    except FileNotFoundError as exc:
        raise RunConfigError(f"inputs.path: {inputs['path']}: no such file or folder") from exc
    except CorpusImportFailed as exc:
        raise RunConfigError("inputs: " + "\n".join(exc.report.lines())) from exc
    return name


def mining_reference_export(*, run: MiningRun) -> list[str]:
    """Write a finished run's procedures where the reference writes them: every procedure
    the run produced (also those an earlier run stored first) as How2Mine records in
    ``out_root/data/all_valid.<ext>``, and the same procedures, in the same order, as flat
    records (``source_example_id``, ``topic``, ``goal``, ``steps``, ``resources``: the
    reference's "ready for h2e bench" file) in ``all_valid_flat.<ext>`` beside it, each in
    shards no larger than ``export.max_file_size`` when one is given; returns the files written."""
    from mining.procedure_records import HOW2MINE_SCHEMA_VERSION

    export = ((run.config or {}).get("reference") or {}).get("export")
    if not export:
        return []
    output = Path(export["output"])
    cut = output.name.find(".")
    stem, suffixes = (output.name, "") if cut <= 0 else (output.name[:cut], output.name[cut:])
    flat = output.with_name(f"{stem}_flat{suffixes}")
    return [
        *_reference_export_file(run=run, output=output, export=export, shape=HOW2MINE_SCHEMA_VERSION),
        *_reference_export_file(run=run, output=flat, export=export, shape="flat"),
    ]


def _reference_export_file(*, run: MiningRun, output: Path, export: dict[str, Any], shape: str) -> list[str]:
    """One of the reference export's files; with ``export.max_file_size``, as the reference
    names them, shards ``<stem>_00000.<ext>``, ``<stem>_00001.<ext>``, … each no larger than
    that (one shard when everything fits: the reference names it so too); returns the files
    written."""
    n = procedure_export(output=output, fmt=export["format"], shape=shape, mining_run=run.name)
    limit = export.get("max_file_size")
    if not limit:
        return [str(output)]
    size = output.stat().st_size
    per_shard = max(1, n) if n < 2 or size <= limit else max(1, -(-n // -(-size // limit)))
    while True:  # records differ in size: shrink the shards until every one fits
        total = max(1, -(-n // per_shard))
        procedure_export(
            output=output,
            fmt=export["format"],
            shape=shape,
            mining_run=run.name,
            shard_size=per_shard,
            shard_name=reference_shard_path,
        )
        paths = [reference_shard_path(output, i, total) for i in range(total)]
        if per_shard == 1 or all(p.stat().st_size <= limit for p in paths):
            break
        for p in paths:
            p.unlink(missing_ok=True)
        per_shard = max(1, per_shard * 3 // 4)
    output.unlink(missing_ok=True)
    return [str(p) for p in paths]
