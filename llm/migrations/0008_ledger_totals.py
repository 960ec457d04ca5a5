# Totals of the ledger kept per run (llm/ledger_totals.py): LedgerTotal, summed here once
# from the entries that exist (one grouped read of the ledger), then kept by every ledger
# write. ERROR_CHARS and the error's reading are llm.ledger_totals.error_key's.

from collections import defaultdict
from decimal import Decimal

from django.db import migrations, models
from django.db.models import Count, Max, Q, Sum

ERROR_CHARS = 300


def totals_fill(apps, schema_editor):
    entry_model = apps.get_model("llm", "LedgerEntry")
    total_model = apps.get_model("llm", "LedgerTotal")
    totals = defaultdict(lambda: [0, 0, 0, Decimal(0), 0, None])
    rows = (
        entry_model.objects.values_list("run", "stage", "model", "outcome", "error")
        .annotate(
            n=Count("id"),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            priced=Sum("cost_usd"),
            unpriced=Count("id", filter=Q(cost_usd__isnull=True)),
            last=Max("created_at"),
        )
        .order_by()
    )
    for run, stage, model, outcome, error, n, tokens_in, tokens_out, priced, unpriced, last in rows.iterator():
        error = "" if outcome == "ok" else (error or "").strip()[:ERROR_CHARS]
        total = totals[(run, stage, model, outcome, error)]
        total[0] += n
        total[1] += tokens_in or 0
        total[2] += tokens_out or 0
        total[3] += priced or Decimal(0)
        total[4] += unpriced
        total[5] = last if total[5] is None or (last is not None and last > total[5]) else total[5]
    total_model.objects.bulk_create(
        [
            total_model(
                run=run, stage=stage, model=model, outcome=outcome, error=error, n=n, tokens_in=tokens_in,
                tokens_out=tokens_out, priced_usd=priced, n_unpriced=unpriced, last_at=last,
            )
            for (run, stage, model, outcome, error), (n, tokens_in, tokens_out, priced, unpriced, last) in totals.items()
        ],
        batch_size=1000,
    )


class Migration(migrations.Migration):

    dependencies = [
        ('llm', '0007_run_lifecycle'),
    ]

    operations = [
        migrations.CreateModel(
            name='LedgerTotal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('run', models.CharField(max_length=200)),
                ('stage', models.CharField(max_length=100)),
                ('model', models.CharField(max_length=200)),
                ('outcome', models.CharField(max_length=20)),
                ('error', models.TextField(blank=True)),
                ('n', models.BigIntegerField(default=0)),
                ('tokens_in', models.BigIntegerField(default=0)),
                ('tokens_out', models.BigIntegerField(default=0)),
                ('priced_usd', models.DecimalField(decimal_places=6, default=0, max_digits=24)),
                ('n_unpriced', models.BigIntegerField(default=0)),
                ('last_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['id'],
                'constraints': [models.UniqueConstraint(fields=('run', 'stage', 'model', 'outcome', 'error'), name='llm_ledger_total_key')],
            },
        ),
        migrations.RunPython(totals_fill, migrations.RunPython.noop),
    ]
