"""Full-text search over the text of stored events (the chat's search, sessions_app.search):
an expression GIN index on PostgreSQL, an FTS5 table kept by triggers on SQLite.

Both index the text parts of an event's content only (not tool calls and their answers).
The SQLite table is filled by triggers, since appends are plain SQL statements
(sessions_app.storage) that no Django signal sees; the PostgreSQL index needs no upkeep.
"""

from django.db import migrations

PG_TSVECTOR = (
    "jsonb_to_tsvector('simple'::regconfig, "
    "jsonb_path_query_array(content::jsonb, '$.parts[*].text'), '[\"string\"]')"
)
PG_FORWARD = [
    f"CREATE INDEX IF NOT EXISTS event_search_text ON sessions_app_eventrecord USING gin "
    f"(({PG_TSVECTOR})) WHERE content IS NOT NULL",
]
PG_BACKWARD = ["DROP INDEX IF EXISTS event_search_text"]

SQLITE_TEXT = (
    "(SELECT group_concat(json_extract(part.value, '$.text'), ' ') "
    "FROM json_each({content}, '$.parts') AS part "
    "WHERE json_type(part.value, '$.text') = 'text' "
    "AND NOT coalesce(json_extract(part.value, '$.thought'), 0))"
)
SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE sessions_app_event_search USING fts5("
    "text, tokenize = 'unicode61 remove_diacritics 2')",
    "CREATE TRIGGER sessions_app_event_search_insert AFTER INSERT ON sessions_app_eventrecord "
    "WHEN json_valid(new.content) BEGIN "
    "INSERT INTO sessions_app_event_search (rowid, text) VALUES "
    f"(new.id, {SQLITE_TEXT.format(content='new.content')}); END",
    "CREATE TRIGGER sessions_app_event_search_delete AFTER DELETE ON sessions_app_eventrecord "
    "BEGIN DELETE FROM sessions_app_event_search WHERE rowid = old.id; END",
    "INSERT INTO sessions_app_event_search (rowid, text) "
    f"SELECT event.id, {SQLITE_TEXT.format(content='event.content')} "
    "FROM sessions_app_eventrecord AS event WHERE json_valid(event.content)",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS sessions_app_event_search_delete",
    "DROP TRIGGER IF EXISTS sessions_app_event_search_insert",
    "DROP TABLE IF EXISTS sessions_app_event_search",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0007_artifacts")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        ),
    ]
