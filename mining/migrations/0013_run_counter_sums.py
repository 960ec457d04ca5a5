# The run's counters keep every document (not only those with stage results), the CPU of
# their walks and what the corpus holds for each topic (mining/run_counters.py). Runs that
# exist are marked to be counted from their rows again on their first read (their counters
# are corrected by the difference, as mining_run_counters_verify does): the migration reads
# no document.

from django.db import migrations, models


def runs_recount(apps, schema_editor):
    apps.get_model("mining", "MiningRun").objects.update(counters_built=False)


class Migration(migrations.Migration):

    dependencies = [
        ('mining', '0012_run_lifecycle'),
    ]

    operations = [
        migrations.AddField(
            model_name='miningruncounter',
            name='cpu_us',
            field=models.BigIntegerField(default=0, db_default=0, help_text="Sum of the CPU each document's walks took, in microseconds (document scope)."),
        ),
        migrations.AddField(
            model_name='miningruncounter',
            name='n_cpu',
            field=models.BigIntegerField(default=0, db_default=0, help_text='Documents whose walk ended, with a CPU time (document scope).'),
        ),
        migrations.AlterField(
            model_name='miningruncounter',
            name='scope',
            field=models.CharField(choices=[('stage', 'Stage results'), ('document', 'Documents'), ('corpus', 'Documents the run can sample')], max_length=10),
        ),
        migrations.RunPython(runs_recount, migrations.RunPython.noop),
    ]
