# A procedure belongs to every mining run that produced it (issue 32, item 2): until now it
# named only its first run (provenance), so a second run over the same documents exported
# nothing. Existing rows are linked to the run their provenance names and to every run with a
# document that passed and became them.

from django.db import migrations, models

BATCH = 2000


def link_existing(apps, schema_editor) -> None:
    Procedure = apps.get_model("mining", "Procedure")
    MiningRun = apps.get_model("mining", "MiningRun")
    MiningCandidate = apps.get_model("mining", "MiningCandidate")
    Link = Procedure.mining_runs.through
    runs = set(MiningRun.objects.values_list("pk", flat=True))
    if not runs:
        return
    pairs: set[tuple[int, int]] = set()

    def flush() -> None:
        Link.objects.bulk_create(
            [Link(procedure_id=p, miningrun_id=r) for p, r in pairs], ignore_conflicts=True, batch_size=BATCH
        )
        pairs.clear()

    for pk, provenance in Procedure.objects.order_by("pk").values_list("pk", "provenance").iterator(chunk_size=BATCH):
        run_id = (provenance or {}).get("mining_run_id") if isinstance(provenance, dict) else None
        if isinstance(run_id, int) and run_id in runs:
            pairs.add((pk, run_id))
            if len(pairs) >= BATCH:
                flush()
    passed = (
        MiningCandidate.objects.filter(status="passed", procedure__isnull=False)
        .order_by("pk")
        .values_list("procedure_id", "run_id")
    )
    for procedure_id, run_id in passed.iterator(chunk_size=BATCH):
        pairs.add((procedure_id, run_id))
        if len(pairs) >= BATCH:
            flush()
    flush()


class Migration(migrations.Migration):
    dependencies = [
        ("mining", "0009_heartbeat_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="procedure",
            name="mining_runs",
            field=models.ManyToManyField(
                blank=True,
                help_text="The mining runs whose documents became this procedure (the first is in provenance).",
                related_name="procedures",
                to="mining.miningrun",
            ),
        ),
        migrations.RunPython(link_existing, migrations.RunPython.noop),
    ]
