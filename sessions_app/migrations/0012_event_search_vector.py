"""The words of each event's text stored beside it on PostgreSQL, and indexed there.

Migration 0008 indexed an expression: a match found through that index had its row's
``jsonb_to_tsvector`` computed again to be rechecked, a JSON parse per candidate of every
user's history. The stored column ``search_vector`` (a generated column, kept by PostgreSQL on
every insert and update, so no code path has to remember it) is read instead, and the index is
built over it. Searches restrict to one user's chats by the event's session
(``sessions_app.selectors.search``), whose btree index the planner combines with this one, so
the rows read are that user's matches. SQLite keeps its FTS5 table of 0008.

The column is unknown to the model on purpose: nothing but the search SQL reads it.
"""

from django.db import migrations

PG_TSVECTOR = (
    "jsonb_to_tsvector('simple'::regconfig, "
    "jsonb_path_query_array(content::jsonb, '$.parts[*].text'), '[\"string\"]')"
)
PG_FORWARD = [
    "ALTER TABLE sessions_app_eventrecord ADD COLUMN IF NOT EXISTS search_vector tsvector "
    f"GENERATED ALWAYS AS ({PG_TSVECTOR}) STORED",
    "CREATE INDEX IF NOT EXISTS event_search_vector ON sessions_app_eventrecord "
    "USING gin (search_vector) WHERE content IS NOT NULL",
    "DROP INDEX IF EXISTS event_search_text",
]
PG_BACKWARD = [
    "CREATE INDEX IF NOT EXISTS event_search_text ON sessions_app_eventrecord USING gin "
    f"(({PG_TSVECTOR})) WHERE content IS NOT NULL",
    "DROP INDEX IF EXISTS event_search_vector",
    "ALTER TABLE sessions_app_eventrecord DROP COLUMN IF EXISTS search_vector",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0011_session_memory_only")]

    operations = [migrations.RunPython(_run(PG_FORWARD), _run(PG_BACKWARD))]
