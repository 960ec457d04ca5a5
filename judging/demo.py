"""Demo generations and judgments: the model outputs and critical failures printed in
How2Everything (Tables 1 and 17-19). Sources are listed in demo/SOURCES.md."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from judging.models import Generation, GenerationRun, Judgment, LanguageModel, PromptStyle
from judging.tokens import procedure_tokens
from llm.run_models import RunStatus
from mining.models import Procedure

DEMO_GENERATIONS = settings.BASE_DIR / "demo" / "data" / "generations.jsonl"

# The models of the demo's leaderboard, registered so that a run can be started with them at
# once (served by the generate role's endpoint). The three API models are reasoning-enabled
# endpoints and the Qwen 3 8B instruct model is not (How2Everything App. D.1: greedy decoding
# for non-reasoning endpoints, T = 0.6 for reasoning-enabled API models).
DEMO_MODELS = {
    "claude-opus-4.5": {"reasoning": True},
    "gemini-2.5-pro": {"reasoning": True},
    "gpt-5": {"reasoning": True},
    "qwen3-8b-instruct": {"reasoning": False},
}


# Tables 17-19 (App. G.1) print the outputs of the same three models for the same three
# procedures, all scored by How2Judge: a matched comparison. The demo files each model's three
# outputs as one finished generation run over exactly those procedures, so the leaderboard's
# rule (docs/how2bench.md) counts each model's coverage against the procedures it was asked
# (3 of 3) and ranks the three on the same items. The Table 1 output of qwen3-8b-instruct is a
# single example with no such set: it stays an imported generation, whose coverage counts
# against the whole How2Bench split, so it is listed unranked (incomplete).
PAPER_COMPARISON_PROCEDURES = ("paper-t7-crime-law", "paper-t18-whole-plasmid-pcr", "paper-t19-journaling-bible-stamps")
PAPER_COMPARISON_MODELS = ("claude-opus-4.5", "gpt-5", "gemini-2.5-pro")
PAPER_COMPARISON_SOURCE = "How2Everything (Chang et al., 2026), Tables 17-19 (App. G.1)"


def paper_comparison_run_name(model: str) -> str:
    return f"Paper examples, Tables 17-19: {model}"


#: The demo's finished runs of the paper's outputs, by name (tests leave them aside when they count runs).
PAPER_COMPARISON_RUN_NAMES = tuple(paper_comparison_run_name(model) for model in PAPER_COMPARISON_MODELS)


def _paper_comparison_runs() -> dict[str, GenerationRun]:
    """One finished run per model of Tables 17-19 (created once; an existing one is kept).
    No request was sent by this product: the outputs are the paper's, so the run has no LLM
    job, and its prompt is the paper's own (App. H.2), which the product's prompt files only
    paraphrase: no hash is recorded for it."""
    ids = dict(
        Procedure.objects.filter(source_example_id__in=PAPER_COMPARISON_PROCEDURES).values_list(
            "source_example_id", "pk"
        )
    )
    procedure_ids = [ids[source] for source in PAPER_COMPARISON_PROCEDURES if source in ids]
    runs = {}
    for model in PAPER_COMPARISON_MODELS:
        runs[model], _ = GenerationRun.objects.get_or_create(
            name=paper_comparison_run_name(model),
            defaults={
                "language_model": LanguageModel.objects.get(name=model),
                "split": "bench",
                "procedure_ids": procedure_ids,
                "prompt_file": f"the paper's generation prompt ({PAPER_COMPARISON_SOURCE}; App. H.2)",
                "prompt_hash": "",
                "status": RunStatus.DONE,
                "finished_at": timezone.now(),
            },
        )
    return runs


def _register_models() -> int:
    """Idempotent: a model registered already (by the demo or by a user) is left as it is."""
    created = 0
    for name, fields in DEMO_MODELS.items():
        _, new = LanguageModel.objects.get_or_create(
            name=name, defaults={"role": "generate", "model": name, "prompt_style": PromptStyle.INST, **fields}
        )
        created += int(new)
    return created


@transaction.atomic
def load() -> str:
    models = _register_models()
    runs = _paper_comparison_runs()
    created = 0
    with open(DEMO_GENERATIONS, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            record = json.loads(line)
            procedure = Procedure.objects.filter(source_example_id=record["source_example_id"]).first()
            if procedure is None:
                raise ValueError(
                    f"{DEMO_GENERATIONS}, line {line_no}: no procedure {record['source_example_id']!r} "
                    "(load the mining demo first)"
                )
            run = runs.get(record["model"]) if record["source_example_id"] in PAPER_COMPARISON_PROCEDURES else None
            generation, new = Generation.objects.get_or_create(
                procedure=procedure,
                model=record["model"],
                defaults={
                    "run": run,
                    "model_label": record.get("model_label", ""),
                    "predicted_steps": record["predicted_steps"],
                    "model_completion": record.get("model_completion") or "",
                    "gen_tokens": procedure_tokens(record["predicted_steps"]),
                    "provenance": {"demo_source": record["demo_source"]},
                },
            )
            if run is not None and generation.run_id is None and "demo_source" in generation.provenance:
                # A demo loaded before the runs existed: its generation joins its run.
                Generation.objects.filter(pk=generation.pk).update(run=run)
            created += int(new)
            Judgment.objects.get_or_create(
                generation=generation,
                judge=record["judge"],
                defaults={
                    "has_failure": record["has_failure"],
                    "critical_failures": record["critical_failures"],
                    "provenance": {"demo_source": record["demo_source"]},
                },
            )
    return (
        f"{created} generations with judgments created; {models} leaderboard models registered; "
        f"the Tables 17-19 outputs filed as {len(runs)} finished generation runs"
    )
