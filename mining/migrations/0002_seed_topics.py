"""Seed the 14 How2Everything topics (How2Everything §3.1, Table 7)."""
from django.db import migrations
from django.utils.text import slugify

TOPICS = (
    "Art & Design", "Crime & Law", "Education & Jobs", "Electronics & Hardware", "Fashion & Beauty",
    "Food & Dining", "Health", "Home & Hobbies", "Industrial", "Religion", "Science, Math & Technology",
    "Sports & Fitness", "Transportation", "Travel & Tourism",
)


def seed(apps, schema_editor):
    Topic = apps.get_model("mining", "Topic")
    for position, name in enumerate(TOPICS):
        Topic.objects.get_or_create(name=name, defaults={"slug": slugify(name), "position": position})


class Migration(migrations.Migration):
    dependencies = [("mining", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
