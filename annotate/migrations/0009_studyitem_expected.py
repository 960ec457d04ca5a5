# A study item's known answer moves into one JSON field read by the item's kind (step 1 of 3:
# the new field beside the three old columns).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("annotate", "0008_kind_choices_from_the_registry"),
    ]

    operations = [
        migrations.AddField(
            model_name="studyitem",
            name="expected",
            field=models.JSONField(
                blank=True, null=True,
                help_text="The known answer in the kind's shape (checks and gold items; multiple choice: every item's "
                          "label); read by the kind only."),
        ),
    ]
