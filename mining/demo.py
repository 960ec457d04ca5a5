"""Demo procedures: the examples printed in How2Everything (Tables 1, 7, 17-19).

The data files and where each record comes from are described in demo/SOURCES.md."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction

from mining.models import Procedure, procedure_identity
from mining.procedure_services import procedure_import, topics_ensure

DEMO_PROCEDURES = settings.BASE_DIR / "demo" / "data" / "procedures.jsonl"


@transaction.atomic
def load() -> str:
    topics_ensure()
    # The paper's examples are How2Bench examples, so the demo files them under "bench".
    result = procedure_import(path=DEMO_PROCEDURES, split="bench")
    with open(DEMO_PROCEDURES, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            identity = procedure_identity(record["source_example_id"], record["goal"])
            Procedure.objects.filter(identity=identity, provenance={}).update(
                provenance={"demo_source": record["demo_source"]}
            )
    return f"{result.created} procedures created, {result.existing} already present"
