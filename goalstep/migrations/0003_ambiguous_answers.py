"""Answers naming two or more candidates are their own outcome, ``ambiguous``: every stored
prediction with a usable completion is read again, so an evaluation stored before (a
listing "A. ... B. ..." read as A, "A or B" counted as unparseable) shows the numbers the
reader gives now. Predictions without a usable completion are left as they are."""

from django.db import migrations, models

BATCH = 2000


def read_answers_again(apps, schema_editor):
    from goalstep.answers import OK, read_choice

    TaskPrediction = apps.get_model("goalstep", "TaskPrediction")
    predictions = TaskPrediction.objects.filter(outcome__in=("ok", "ambiguous", "unparseable")).select_related("item")
    changed = []
    for prediction in predictions.iterator(chunk_size=BATCH):
        reading = read_choice(prediction.completion, prediction.item.candidates)
        correct = reading.choice == prediction.item.label if reading.outcome == OK else None
        if (prediction.outcome, prediction.choice, prediction.correct) != (reading.outcome, reading.choice, correct):
            prediction.outcome, prediction.choice, prediction.correct = reading.outcome, reading.choice, correct
            changed.append(prediction)
        if len(changed) >= BATCH:
            TaskPrediction.objects.bulk_update(changed, ["outcome", "choice", "correct"])
            changed = []
    TaskPrediction.objects.bulk_update(changed, ["outcome", "choice", "correct"])


class Migration(migrations.Migration):
    dependencies = [
        ("goalstep", "0002_run_states"),
    ]

    operations = [
        migrations.AlterField(
            model_name="taskprediction",
            name="outcome",
            field=models.CharField(
                help_text="The LLM call's outcome, or how its answer read: ok, ambiguous or unparseable.",
                max_length=20,
            ),
        ),
        migrations.RunPython(read_answers_again, migrations.RunPython.noop),
    ]
