# Counts kept as a mining run goes (issue 29, part 5): MiningRunCounter, changed in the
# transaction that writes a document's stage results (mining/run_counters.py). Runs made
# before this migration get counters_built = False and are counted from their rows on their
# first read (lazily, so the migration itself reads no stage result); runs made after it
# start with True.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mining', '0010_procedure_mining_runs'),
    ]

    operations = [
        migrations.AddField(
            model_name='miningrun',
            name='counters_built',
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name='miningrun',
            name='counters_built',
            field=models.BooleanField(default=True, help_text='Its counters (MiningRunCounter) hold every stage result; false for a run made before they were kept, until its first read counts them from its rows (mining/run_counters.py).'),
        ),
        migrations.CreateModel(
            name='MiningRunCounter',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(choices=[('stage', 'Stage results'), ('document', 'Documents')], max_length=10)),
                ('stage', models.CharField(blank=True, max_length=40)),
                ('status', models.CharField(blank=True, help_text="The stage result's status (stage scope).", max_length=20)),
                ('candidate_status', models.CharField(choices=[('pending', 'Pending'), ('passed', 'Passed'), ('rejected', 'Rejected'), ('failed', 'Failed')], max_length=10)),
                ('reason', models.TextField(blank=True, help_text="A rejected document's reason code (document scope).")),
                ('n', models.BigIntegerField(default=0)),
                ('cost_usd', models.DecimalField(decimal_places=6, default=0, max_digits=24)),
                ('cost_usd_squares', models.DecimalField(decimal_places=12, default=0, help_text="Sum of each document's cost squared (document scope).", max_digits=36)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='counters', to='mining.miningrun')),
                ('topic', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='mining.topic')),
            ],
            options={
                'ordering': ['id'],
                'constraints': [models.UniqueConstraint(fields=('run', 'topic', 'scope', 'stage', 'status', 'candidate_status', 'reason'), name='mining_run_counter_unique_key')],
            },
        ),
    ]
