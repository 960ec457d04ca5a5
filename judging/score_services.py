"""Writes for SCORE on How2Bench runs (docs/score.md): ``extract_components`` runs, which
turn the steps of a generation run's references and generations into (action, objects,
parameters) through the LLM layer and store them, once per step list and extractor."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from decimal import Decimal

from django.db import transaction

from judging.components import ComponentsError, components_answer, components_schema
from judging.constants import COMPONENTS_MAX_TOKENS, GREEDY_TEMPERATURE
from judging.models import ComponentExtraction, ComponentsRun, GenerationRun
from judging.prompts import Prompt, numbered_steps, prompt_load
from llm.endpoints import endpoint_require
from llm.request import LLMRequest
from llm.run_lifecycle import owned_run_execute, owned_run_job_attach, owned_run_resume, owned_run_retry_failed
from llm.sampling import sampling_params
from llm.selectors import llm_job_results
from llm.services import ledger_entry_reject
from llm.shards import llm_job_tasks

DEFAULT_COMPONENTS_PROMPT = "extract_components.txt"
COMPONENTS_STAGE = "extract_components"


def steps_hash(steps: Sequence[str]) -> str:
    """The key of a step list: SHA-256 of its JSON text."""
    return hashlib.sha256(json.dumps(list(steps), ensure_ascii=False).encode("utf-8")).hexdigest()


def llm_extractor_name(model: str, prompt_hash: str) -> str:
    """Stored components are keyed by the model and the prompt that produced them."""
    return f"llm:{model}@{prompt_hash[:12]}"


def generation_run_step_lists(generation_run: GenerationRun) -> dict[str, list[str]]:
    """Every step list SCORE needs for a run, by hash: the reference of each usable
    generation and its generated steps (an empty generation needs no components)."""
    lists: dict[str, list[str]] = {}
    for generation in generation_run.generations.filter(outcome="ok").select_related("procedure").order_by("id"):
        for steps in (generation.procedure.steps, generation.predicted_steps):
            if steps:
                lists.setdefault(steps_hash(steps), list(steps))
    return lists


def components_request(steps: Sequence[str], prompt: Prompt, *, role: str = COMPONENTS_STAGE) -> LLMRequest:
    """One ``extract_components`` request for a step list: strict JSON schema that asks for
    exactly one triple per step (a wrong count is parse_failed and re-asked). A components
    run has no sampling options of its own: the role's ``COMPONENTS_TEMPERATURE`` /
    ``COMPONENTS_MAX_TOKENS`` (or ``LLM_*``) over greedy and COMPONENTS_MAX_TOKENS
    (llm/sampling.py)."""
    return LLMRequest(
        stage=COMPONENTS_STAGE,
        messages=[{"role": "user", "content": prompt.render(steps=numbered_steps(list(steps)))}],
        params=sampling_params(role, built_in={"temperature": GREEDY_TEMPERATURE, "max_tokens": COMPONENTS_MAX_TOKENS}),
        schema=components_schema(len(steps)),
    )


@transaction.atomic
def components_run_create(
    *,
    generation_run: GenerationRun,
    name: str | None = None,
    role: str = COMPONENTS_STAGE,
    prompt_file: str | None = None,
    executor: str = "online",
    concurrency: int = 16,
    budget_usd: Decimal | None = None,
    start: bool = True,
) -> ComponentsRun:
    """Extract the components of a generation run's step lists. Lists this extractor (model
    and prompt) already has usable components of are reused and not sent again; a list whose
    extraction failed is asked again. The default name is ``<generation run>-components-<n>``."""
    name = name or f"{generation_run.name}-components-{generation_run.components_runs.count() + 1}"
    prompt = prompt_load(prompt_file or DEFAULT_COMPONENTS_PROMPT, kind=COMPONENTS_STAGE)
    extractor = llm_extractor_name(endpoint_require(role).model, prompt.sha256)
    lists = generation_run_step_lists(generation_run)
    stored = set(
        ComponentExtraction.objects.filter(extractor=extractor, steps_hash__in=list(lists), outcome="ok").values_list(
            "steps_hash", flat=True
        )
    )
    todo = [key for key in lists if key not in stored]
    run = ComponentsRun.objects.create(
        name=name,
        generation_run=generation_run,
        role=role,
        extractor=extractor,
        steps_hashes=todo,
        prompt_file=prompt.path,
        prompt_hash=prompt.sha256,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
    )
    owned_run_job_attach(
        run,
        label="components-run",
        role=role,
        requests=[components_request(lists[key], prompt, role=role) for key in todo],
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
    )
    if start:
        _components_enqueue(run)()
    return run


def components_run_execute(*, run_id: int) -> str:
    run = ComponentsRun.objects.select_related("llm_job", "generation_run").filter(pk=run_id).first()
    return (
        "gone"
        if run is None
        else owned_run_execute(run, collect=components_run_collect, unusable=components_run_unusable)
    )


def components_run_unusable(run: ComponentsRun) -> int:
    """Step lists of the run whose extraction has no usable components."""
    return (
        ComponentExtraction.objects.filter(extractor=run.extractor, steps_hash__in=run.steps_hashes)
        .exclude(outcome="ok")
        .count()
    )


def _components_discard_unusable(run: ComponentsRun) -> int:
    return (
        ComponentExtraction.objects.filter(extractor=run.extractor, steps_hash__in=run.steps_hashes)
        .exclude(outcome="ok")
        .delete()[0]
    )


def _components_enqueue(run: ComponentsRun):
    from judging.tasks import components_run_execute_task

    # One task per shard of the run's job still to execute (llm/shards.py).
    return lambda: transaction.on_commit(
        lambda: [components_run_execute_task.delay(run.pk) for _ in range(llm_job_tasks(run.llm_job_id))]
    )


def components_run_retry_failed(*, run: ComponentsRun) -> int:
    """*Retry failed* of a components run: exactly its requests without an ``ok`` answer."""
    return owned_run_retry_failed(run, enqueue=_components_enqueue(run), discard_unusable=_components_discard_unusable)


def components_run_resume(*, run: ComponentsRun) -> None:
    owned_run_resume(run, enqueue=_components_enqueue(run))


def components_run_collect(run: ComponentsRun) -> int:
    """Store the components of every finished request (idempotent). An answer that is not
    one valid triple per step is stored as ``parse_failed`` with the reason and no
    components: SCORE then uses the rule-based components for that pair, never a guess. An
    ``ok`` ledger answer refused here (from a ledger written before the count was bounded)
    is marked failed in the ledger, so *Retry failed* and new runs ask it again. A stored
    extraction without usable components is replaced by a newer answer."""
    job = run.llm_job
    if job is None:  # not launched: nothing has finished
        return 0
    lists = generation_run_step_lists(run.generation_run)
    existing = dict(
        ComponentExtraction.objects.filter(extractor=run.extractor, steps_hash__in=run.steps_hashes).values_list(
            "steps_hash", "outcome"
        )
    )
    new, replaced = [], []
    for key, result in zip(run.steps_hashes, llm_job_results(job)):
        if result is None or existing.get(key) == "ok" or key not in lists or result.outcome == "api_error":
            continue
        steps = lists[key]
        outcome, components, error = result.outcome, [], result.error
        if result.ok:
            try:
                components = [triple.as_dict() for triple in components_answer(result.value, len(steps))]
            except ComponentsError as exc:
                outcome, error = "parse_failed", str(exc)
                ledger_entry_reject(key=result.key, reason=error, run=job.run)
        if key in existing:
            if existing[key] == outcome:
                continue  # the same failure, stored already
            replaced.append(key)
        new.append(
            ComponentExtraction(
                steps_hash=key,
                extractor=run.extractor,
                steps=steps,
                components=components,
                outcome=outcome,
                error=error,
                prompt_hash=run.prompt_hash,
                ledger_key=result.key,
            )
        )
    with transaction.atomic():
        ComponentExtraction.objects.filter(extractor=run.extractor, steps_hash__in=replaced).exclude(
            outcome="ok"
        ).delete()
        ComponentExtraction.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)
