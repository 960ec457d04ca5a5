# The ledger's and the LLM jobs' large values compressed with LZ4 on PostgreSQL, where the
# server has it (llm/migrations/_compression.py); nothing on other databases.

from django.db import migrations

from llm.migrations._compression import set_compression


def to_lz4(apps, schema_editor):
    set_compression(schema_editor, "lz4")


def to_default(apps, schema_editor):
    set_compression(schema_editor, "DEFAULT")


class Migration(migrations.Migration):
    dependencies = [("llm", "0008_ledger_totals")]

    operations = [migrations.RunPython(to_lz4, to_default)]
