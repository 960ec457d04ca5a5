"""Tokens of DRF's authtoken app (stored in plain text, never expiring) become hashed API tokens
that expire API_TOKEN_DAYS from now, so existing clients keep working for that long; then the
plain-text table is dropped, with authtoken's migration records, content types and permissions.
A database created after authtoken left INSTALLED_APPS has no such table: nothing to do."""
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone

from core.api_tokens import secret_digest, secret_prefix

LEGACY_TABLE = "authtoken_token"


def import_legacy_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if LEGACY_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("core", "ApiToken")
    table = schema_editor.quote_name(LEGACY_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {schema_editor.quote_name('key')}, user_id FROM {table}")
        rows = cursor.fetchall()
    now = timezone.now()
    expires = now + timedelta(days=getattr(settings, "API_TOKEN_DAYS", 90))
    for key, user_id in rows:
        ApiToken.objects.create(
            user_id=user_id, label="imported (old token)", prefix=secret_prefix(key),
            digest=secret_digest(key), created_at=now, expires_at=expires,
        )
    schema_editor.execute(f"DROP TABLE {table}")
    schema_editor.execute("DELETE FROM django_migrations WHERE app = %s", ["authtoken"])
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="authtoken").delete()


class Migration(migrations.Migration):

    dependencies = [
        ("core", "0001_api_tokens"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.RunPython(import_legacy_tokens, migrations.RunPython.noop),
    ]
