"""Demo generations and judgments: the model outputs and critical failures printed in
How2Everything (Tables 1 and 17-19). Sources are listed in demo/SOURCES.md."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction

from judging.models import Generation, Judgment, LanguageModel, PromptStyle
from judging.tokens import procedure_tokens
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
            generation, new = Generation.objects.get_or_create(
                procedure=procedure,
                model=record["model"],
                defaults={
                    "model_label": record.get("model_label", ""),
                    "predicted_steps": record["predicted_steps"],
                    "model_completion": record.get("model_completion") or "",
                    "gen_tokens": procedure_tokens(record["predicted_steps"]),
                    "provenance": {"demo_source": record["demo_source"]},
                },
            )
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
    models = _register_models()
    return f"{created} generations with judgments created; {models} leaderboard models registered"
