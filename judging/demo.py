"""Demo generations and judgments: the model outputs and critical failures printed in
How2Everything (Tables 1 and 17-19). Sources are listed in demo/SOURCES.md."""
from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction

from judging.models import Generation, Judgment
from judging.tokens import procedure_tokens
from mining.models import Procedure

DEMO_GENERATIONS = settings.BASE_DIR / "demo" / "data" / "generations.jsonl"


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
    return f"{created} generations with judgments created"
