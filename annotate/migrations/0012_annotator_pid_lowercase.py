"""PROLIFIC_PIDs are stored in lowercase (one person is one annotator, whatever the case of the
id in their link). An existing id in another case is lowercased unless its lowercase twin is
already an annotator: those two stay as they were (their annotations cannot be merged without
a person deciding), and new entries in either case join the lowercase one."""

from django.db import migrations


def lowercase_pids(apps, schema_editor):
    Annotator = apps.get_model("annotate", "Annotator")
    taken = set(Annotator.objects.values_list("pid", flat=True))
    for annotator in Annotator.objects.all().only("pid"):
        lowered = annotator.pid.lower()
        if lowered != annotator.pid and lowered not in taken:
            taken.discard(annotator.pid)
            taken.add(lowered)
            annotator.pid = lowered
            annotator.save(update_fields=["pid"])


class Migration(migrations.Migration):
    dependencies = [("annotate", "0011_remove_studyitem_expected_columns")]

    operations = [migrations.RunPython(lowercase_pids, migrations.RunPython.noop)]
