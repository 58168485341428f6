"""Session ids unique within their (app, user), as ADK's, behind a surrogate key.

The old primary key column becomes the surrogate ``key``: every row that points to a session
(events, state, artifacts, memories, jobs, claims) keeps pointing to it unchanged, and each
session keeps its id as its ``session_id``. Nothing is copied but that one column.
"""

from django.conf import settings
from django.db import migrations, models
from django.db.models import F

import sessions_app.models


def session_ids_copy(apps, schema_editor):
    SessionRecord = apps.get_model("sessions_app", "SessionRecord")
    SessionRecord.objects.using(schema_editor.connection.alias).update(session_id=F("key"))


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0009_event_memory_excluded"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(model_name="sessionrecord", name="session_user_app_recent"),
        migrations.RenameField(model_name="sessionrecord", old_name="id", new_name="key"),
        migrations.AlterField(
            model_name="sessionrecord",
            name="key",
            field=models.CharField(
                default=sessions_app.models.session_key_new,
                editable=False,
                max_length=128,
                primary_key=True,
                serialize=False,
            ),
        ),
        migrations.AddField(
            model_name="sessionrecord",
            name="session_id",
            field=models.CharField(default="", max_length=128),
            preserve_default=False,
        ),
        migrations.RunPython(session_ids_copy, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="sessionrecord",
            constraint=models.UniqueConstraint(
                fields=("app_name", "user", "session_id"), name="session_app_user_id"
            ),
        ),
        migrations.AddIndex(
            model_name="sessionrecord",
            index=models.Index(
                fields=["user", "app_name", "-last_update_time", "-session_id"],
                name="session_user_app_recent_id",
            ),
        ),
    ]
