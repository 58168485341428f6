"""The words of each memory indexed by the database, so that a search reads its candidates
through an index instead of a process building one from all of a person's memories.

PostgreSQL: a stored column ``search_vector`` (``to_tsvector('simple', text)``, kept by
PostgreSQL on every insert and update) and a GIN index over it prefixed with the memory's owner
(``sessions_app_owner_words`` of sessions_app 0014, "4_lisbon"), so a person's matches of a word
are read without anyone else's; active memories alone, since only those are searched. The app's
shared memories (no owner) are few and read through their own btree index.

SQLite: an FTS5 table kept by triggers, holding each memory's id beside its words; the id, not
the table's rowid, which ``VACUUM`` may renumber on a table whose key is not an integer.

Both index the words as they are (``simple``, FTS5's ``unicode61``); a search asks for each
word's forms as prefixes, as the search of chats does (``sessions_app.selectors.search``).

``memory_owner_recent`` replaces ``memory_owner_status``: the same columns and the time of the
last change, newest first, so a person's newest memories are read without sorting all of them;
``memory_owner_important`` reads their most important ones so (a question about the person as
a whole is answered with those).
The column is unknown to the model on purpose: nothing but the search SQL reads it.
"""

from django.conf import settings
from django.db import migrations, models

MEMORIES = "memory_app_memory"
# A memory's row of the SQLite words table: its own integer, kept with its id.
SEARCH_ROW = "(SELECT id FROM memory_app_memory_search_row WHERE memory_id = new.id)"
OLD_SEARCH_ROW = "(SELECT id FROM memory_app_memory_search_row WHERE memory_id = old.id)"
PG_FORWARD = [
    f"ALTER TABLE {MEMORIES} ADD COLUMN IF NOT EXISTS search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, text)) STORED",
    f"CREATE INDEX IF NOT EXISTS memory_owner_words ON {MEMORIES} "
    "USING gin (sessions_app_owner_words(user_id, search_vector)) WHERE status = 'active'",
]
PG_BACKWARD = [
    "DROP INDEX IF EXISTS memory_owner_words",
    f"ALTER TABLE {MEMORIES} DROP COLUMN IF EXISTS search_vector",
]
SQLITE_FORWARD = [
    "CREATE TABLE memory_app_memory_search_row ("
    "id INTEGER PRIMARY KEY, memory_id char(32) NOT NULL UNIQUE)",
    "CREATE VIRTUAL TABLE memory_app_memory_search USING fts5("
    "text, tokenize = 'unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER memory_app_memory_search_insert AFTER INSERT ON {MEMORIES} BEGIN "
    "INSERT INTO memory_app_memory_search_row (memory_id) VALUES (new.id); "
    f"INSERT INTO memory_app_memory_search (rowid, text) VALUES ({SEARCH_ROW}, new.text); END",
    f"CREATE TRIGGER memory_app_memory_search_update AFTER UPDATE OF text ON {MEMORIES} BEGIN "
    f"UPDATE memory_app_memory_search SET text = new.text WHERE rowid = {SEARCH_ROW}; END",
    f"CREATE TRIGGER memory_app_memory_search_delete AFTER DELETE ON {MEMORIES} BEGIN "
    f"DELETE FROM memory_app_memory_search WHERE rowid = {OLD_SEARCH_ROW}; "
    "DELETE FROM memory_app_memory_search_row WHERE memory_id = old.id; END",
    f"INSERT INTO memory_app_memory_search_row (memory_id) SELECT id FROM {MEMORIES}",
    "INSERT INTO memory_app_memory_search (rowid, text) SELECT row.id, memory.text "
    f"FROM memory_app_memory_search_row AS row JOIN {MEMORIES} AS memory "
    "ON memory.id = row.memory_id",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS memory_app_memory_search_delete",
    "DROP TRIGGER IF EXISTS memory_app_memory_search_update",
    "DROP TRIGGER IF EXISTS memory_app_memory_search_insert",
    "DROP TABLE IF EXISTS memory_app_memory_search",
    "DROP TABLE IF EXISTS memory_app_memory_search_row",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0016_embedding_warning"),
        ("sessions_app", "0014_event_owner"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                fields=["user", "app_name", "status", "-updated_at"], name="memory_owner_recent"
            ),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                fields=["user", "app_name", "status", "-importance"], name="memory_owner_important"
            ),
        ),
        migrations.RemoveIndex(model_name="memory", name="memory_owner_status"),
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        ),
    ]
