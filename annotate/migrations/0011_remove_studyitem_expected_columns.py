# Step 3 of 3: the three per-kind known-answer columns go (``expected`` holds their values).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("annotate", "0010_studyitem_expected_copy"),
    ]

    operations = [
        migrations.RemoveField(model_name="studyitem", name="expected_has_failure"),
        migrations.RemoveField(model_name="studyitem", name="expected_choice"),
        migrations.RemoveField(model_name="studyitem", name="expected_answer"),
    ]
