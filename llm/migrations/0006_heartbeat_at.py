# A run's last heartbeat (issue 28, F-11): a running run without one for a lease reads stalled.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("llm", "0005_endpoint_capabilities"),
    ]

    operations = [
        migrations.AddField(
            model_name="llmjob",
            name="heartbeat_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When a worker last said it is at work on it; a running one without a beat for a lease "
                "reads stalled (llm/runs.py, run_liveness)",
                null=True,
            ),
        ),
    ]
