"""The migration that gives memory owners an index version: a version of 0 (or no settings row)
now says the user never had a memory, so memories kept from before index versions must not
read as none."""

import pytest

from memory_app import selectors
from memory_app.models import MemorySettings
from tests.migration_steps import migrated_to, migrated_to_latest

BEFORE = [("memory_app", "0011_turn_records_retire")]


@pytest.mark.django_db(transaction=True)
def test_memories_kept_before_index_versions_are_still_found():
    old = migrated_to(BEFORE)
    try:
        users = old.get_model("auth", "User").objects
        with_row, without_row, no_memory = (
            users.create(username=name) for name in ("with-row", "without-row", "no-memory")
        )
        settings = old.get_model("memory_app", "MemorySettings").objects
        settings.create(user_id=with_row.pk, index_version=0)
        settings.create(user_id=no_memory.pk, index_version=0)
        for user, text in ((with_row, "Plays the cello"), (without_row, "Keeps bees")):
            old.get_model("memory_app", "Memory").objects.create(
                app_name="chat", scope="user", user_id=user.pk, text=text, source_type="explicit"
            )
    finally:
        migrated_to_latest()

    versions = dict(MemorySettings.objects.values_list("user_id", "index_version"))
    assert versions[with_row.pk] != 0 and versions[without_row.pk] != 0
    assert versions[no_memory.pk] == 0
    found = {
        user.pk: [
            m.text for m in selectors.memory_search(app_name="chat", user_pk=user.pk, query=q)
        ]
        for user, q in ((with_row, "cello"), (without_row, "bees"), (no_memory, "cello"))
    }
    assert found == {
        with_row.pk: ["Plays the cello"],
        without_row.pk: ["Keeps bees"],
        no_memory.pk: [],
    }
