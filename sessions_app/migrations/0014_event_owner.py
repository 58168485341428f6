"""Each event carries its session's owner (user and app), and PostgreSQL indexes it.

A search of one person's past chats (``sessions_app.selectors.search``) wants that person's
newest events holding a word. Through the session, PostgreSQL's words index of 0012 found every
person's matches of the word and then kept the person's; with the owner on the row, the btree
``event_owner_recent`` reads a person's events newest first, and the GIN index
``event_owner_words`` finds one person's matches of a word without reading anyone else's: its
entries are each event's words prefixed with its user (``sessions_app_owner_words``: "4_tea"),
so a prefix search ("4_te:*") reads that person's entries alone. It replaces 0012's
``event_search_vector``, which nothing reads any more. (The ``btree_gin`` extension's GIN
index over (user, words) was measured too: a prefix search there still collects every
person's matching entries, docs/benchmarks.md.)

The function is STRICT: building the index also reads the row versions the filling replaced
(another transaction may still see them), whose owner is NULL; they give no entries.

The events stored before are filled in batches of ``BATCH`` rows by id, each batch its own
transaction (the migration is not atomic), so a large table is neither locked whole nor
rewritten in one transaction. The columns are filled before the indexes are built.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models, transaction

BATCH = 20_000
EVENTS = "sessions_app_eventrecord"
SESSIONS = "sessions_app_sessionrecord"

PG_FORWARD = [
    "CREATE OR REPLACE FUNCTION sessions_app_owner_words(owner bigint, words tsvector) "
    "RETURNS tsvector LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS "
    "$$ SELECT array_to_tsvector(array_agg(owner::text || '_' || lexeme)) FROM unnest(words) $$",
    f"CREATE INDEX IF NOT EXISTS event_owner_words ON {EVENTS} "
    "USING gin (sessions_app_owner_words(user_id, search_vector)) WHERE content IS NOT NULL",
    "DROP INDEX IF EXISTS event_search_vector",
]
PG_BACKWARD = [
    f"CREATE INDEX IF NOT EXISTS event_search_vector ON {EVENTS} "
    "USING gin (search_vector) WHERE content IS NOT NULL",
    "DROP INDEX IF EXISTS event_owner_words",
    "DROP FUNCTION IF EXISTS sessions_app_owner_words(bigint, tsvector)",
]


def owners_fill(apps, schema_editor):
    """Copy each stored event's session owner onto it, ``BATCH`` ids at a time."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(id), max(id) FROM {EVENTS} WHERE user_id IS NULL")
        low, high = cursor.fetchone()
    if low is None:
        return
    for start in range(low, high + 1, BATCH):
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {EVENTS} SET (user_id, app_name) = (SELECT session.user_id, "
                f'session.app_name FROM {SESSIONS} AS session WHERE session."key" = '
                f"{EVENTS}.session_id) WHERE id >= %s AND id < %s AND user_id IS NULL",
                [start, start + BATCH],
            )


def _postgresql(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("sessions_app", "0013_event_blob_and_file_data"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="eventrecord",
            name="app_name",
            field=models.CharField(help_text="The session's app.", max_length=128, null=True),
        ),
        migrations.AddField(
            model_name="eventrecord",
            name="user",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                help_text="The session's user (deleted with the session, not through this link).",
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(owners_fill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="eventrecord",
            index=models.Index(
                condition=models.Q(("content__isnull", False)),
                fields=["user", "app_name", "-timestamp", "-id"],
                name="event_owner_recent",
            ),
        ),
        migrations.RunPython(_postgresql(PG_FORWARD), _postgresql(PG_BACKWARD)),
    ]
