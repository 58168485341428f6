"""Give a version to the users whose memories predate index versions (0003), and a settings row
to any such user without one: no row, or a version of 0, says the user never had a memory,
which search then skips."""

import secrets

from django.db import migrations


def forwards(apps, schema_editor):
    Memory = apps.get_model("memory_app", "Memory")
    MemorySettings = apps.get_model("memory_app", "MemorySettings")
    version = secrets.randbits(63) or 1
    owners = Memory.objects.filter(user__isnull=False).values("user_id")
    MemorySettings.objects.filter(index_version=0, user_id__in=owners).update(index_version=version)
    without_row = (
        Memory.objects.filter(user__isnull=False, user__memory_settings__isnull=True)
        .values_list("user_id", flat=True)
        .distinct()
    )
    MemorySettings.objects.bulk_create(
        MemorySettings(user_id=user_id, index_version=version) for user_id in without_row
    )


class Migration(migrations.Migration):
    dependencies = [("memory_app", "0011_turn_records_retire")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
