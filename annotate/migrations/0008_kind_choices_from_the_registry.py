# The kind fields take their choices from the registry when asked (annotate.kinds.kind_choices).

from django.db import migrations, models

import annotate.kinds


class Migration(migrations.Migration):

    dependencies = [
        ('annotate', '0007_test_participants'),
    ]

    operations = [
        migrations.AlterField(
            model_name='guidelineversion',
            name='kind',
            field=models.CharField(choices=annotate.kinds.kind_choices, max_length=50),
        ),
        migrations.AlterField(
            model_name='study',
            name='kind',
            field=models.CharField(choices=annotate.kinds.kind_choices, max_length=50),
        ),
    ]
