# Step 2 of 3: every known answer copied into ``expected``, and back again when migrating
# backwards. An item has at most one of the three old columns set (one per kind): a has_failure
# (a JSON boolean), a label (a JSON integer), or answers by question (a JSON object), so the
# shape of the value says which column it came from.

from django.db import migrations

BATCH = 2000


def _forwards(apps, schema_editor):
    StudyItem = apps.get_model("annotate", "StudyItem")
    rows = (StudyItem.objects.filter(expected_has_failure__isnull=False)
            | StudyItem.objects.filter(expected_choice__isnull=False)
            | StudyItem.objects.filter(expected_answer__isnull=False))
    changed = []
    for item in rows.order_by("pk").iterator(chunk_size=BATCH):
        if item.expected_has_failure is not None:
            item.expected = item.expected_has_failure
        elif item.expected_choice is not None:
            item.expected = item.expected_choice
        else:
            item.expected = item.expected_answer
        changed.append(item)
        if len(changed) >= BATCH:
            StudyItem.objects.bulk_update(changed, ["expected"])
            changed = []
    StudyItem.objects.bulk_update(changed, ["expected"])


def _backwards(apps, schema_editor):
    StudyItem = apps.get_model("annotate", "StudyItem")
    changed = []
    for item in StudyItem.objects.filter(expected__isnull=False).order_by("pk").iterator(chunk_size=BATCH):
        value = item.expected
        item.expected_has_failure = value if isinstance(value, bool) else None
        item.expected_choice = value if isinstance(value, int) and not isinstance(value, bool) else None
        item.expected_answer = value if isinstance(value, dict) else None
        changed.append(item)
        if len(changed) >= BATCH:
            StudyItem.objects.bulk_update(changed, ["expected_has_failure", "expected_choice", "expected_answer"])
            changed = []
    StudyItem.objects.bulk_update(changed, ["expected_has_failure", "expected_choice", "expected_answer"])


class Migration(migrations.Migration):

    dependencies = [
        ("annotate", "0009_studyitem_expected"),
    ]

    operations = [
        migrations.RunPython(_forwards, _backwards),
    ]
