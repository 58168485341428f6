from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0010_session_ids_per_app_user"),
    ]

    operations = [
        migrations.AddField(
            model_name="sessionrecord",
            name="memory_only",
            field=models.BooleanField(
                default=False,
                help_text="Holds events given to long-term memory only (ADK's "
                "add_events_to_memory): no conversation, session list or search shows it; "
                "memory jobs read it.",
            ),
        ),
    ]
