"""Limits against slot hoarding (issue 18): a Prolific study id and the PID rule per study,
a seed of each participant's attention-check plan, and the first activity of an assignment.

Rows that exist already keep their old behaviour: studies created before this migration
accept any participant id (as they did), and existing assignments count as active (their
leases were granted in full)."""
from django.db import migrations, models
from django.db.models import F


def keep_existing_behaviour(apps, schema_editor):
    apps.get_model("annotate", "Study").objects.update(allow_other_pids=True)
    apps.get_model("annotate", "Assignment").objects.update(activity_seen_at=F("reserved_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('annotate', '0004_study_min_annotations_for_majority'),
    ]

    operations = [
        migrations.AddField(
            model_name='assignment',
            name='activity_seen_at',
            field=models.DateTimeField(blank=True, help_text="The server's time of the first save with an event or a draft (until then the lease is short).", null=True),
        ),
        migrations.AddField(
            model_name='participation',
            name='attention_seed',
            field=models.BigIntegerField(blank=True, help_text="Seed of this participant's attention-check positions and order (annotate/participation/attention_plan.py).", null=True),
        ),
        migrations.AddField(
            model_name='study',
            name='allow_other_pids',
            field=models.BooleanField(default=False, help_text="Accept participant ids that do not look like Prolific's (24 hexadecimal characters): for demos, pilots with colleagues and tests."),
        ),
        migrations.AddField(
            model_name='study',
            name='prolific_study_id',
            field=models.CharField(blank=True, help_text="Prolific's id of this study: when set, the entry URL's STUDY_ID must equal it.", max_length=100),
        ),
        migrations.RunPython(keep_existing_behaviour, migrations.RunPython.noop),
    ]
