"""Retire the whole-turn records earlier versions kept as memories, keeping the facts they state
(memory_app.services.turn_records)."""

from django.db import migrations

from memory_app.services.turn_records import turn_records_retire


def forwards(apps, schema_editor):
    turn_records_retire(apps=apps)


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0010_memory_status_retired"),
        ("sessions_app", "0009_event_memory_excluded"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
