"""Each event carries its session's owner (user and app), and PostgreSQL indexes it.

A search of one person's past chats (``sessions_app.selectors.search``) wants that person's
newest events holding a word. Through the session, PostgreSQL's words index found every
person's matches of the word and then kept the person's; with the owner on the row, the btree
``event_owner_recent`` reads a person's events newest first, and where the ``btree_gin``
extension can be created, the GIN index ``event_owner_search`` over (user, app, words) finds
one person's matches of a word directly (it then replaces 0012's ``event_search_vector``;
without the extension that index stays, and the planner combines it with the btree).

The events stored before are filled in batches of ``BATCH`` rows by id, each batch its own
transaction (the migration is not atomic), so a large table is neither locked whole nor
rewritten in one transaction. The columns are filled before the indexes are built.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import DatabaseError, migrations, models, transaction

BATCH = 20_000
EVENTS = "sessions_app_eventrecord"
SESSIONS = "sessions_app_sessionrecord"

PG_OWNER_SEARCH = (
    f"CREATE INDEX IF NOT EXISTS event_owner_search ON {EVENTS} "
    "USING gin (user_id, app_name, search_vector) WHERE content IS NOT NULL"
)
PG_WORDS_ALONE = (
    f"CREATE INDEX IF NOT EXISTS event_search_vector ON {EVENTS} "
    "USING gin (search_vector) WHERE content IS NOT NULL"
)


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


def btree_gin_available(connection) -> bool:
    """Whether ``btree_gin`` is installed or can be installed here (a server without the
    contrib package, or a role that may not create it, keeps 0012's index)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'")
        if cursor.fetchone():
            return True
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin'")
        if not cursor.fetchone():
            return False
        try:
            with transaction.atomic(using=connection.alias):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        except DatabaseError:  # not allowed to: 0012's index stays
            return False
    return True


def owner_search_create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    if btree_gin_available(schema_editor.connection):
        schema_editor.execute(PG_OWNER_SEARCH)
        schema_editor.execute("DROP INDEX IF EXISTS event_search_vector")


def owner_search_drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(PG_WORDS_ALONE)
    schema_editor.execute("DROP INDEX IF EXISTS event_owner_search")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("sessions_app", "0012_event_search_vector"),
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
        migrations.RunPython(owner_search_create, owner_search_drop),
    ]
