"""How the suite empties PostgreSQL after a transactional test (tests/postgresql/base.py)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from google.genai import types

from memory_app.models import MemorySource
from sessions_app import services
from sessions_app.events import Event
from sessions_app.models import EventRecord
from tests.factories import MemoryFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _rows_linked_across_tables():
    """A user with a chat, its event and a memory made from that event: rows that reference
    one another across four tables."""
    user = UserFactory()
    session = services.session_create(app_name="chat", user_id=str(user.pk))
    services.event_append(
        session=session,
        event=Event(
            invocation_id="inv",
            author="user",
            content=types.Content(role="user", parts=[types.Part(text="I live in Porto.")]),
        ),
    )
    memory = MemoryFactory(user=user, text="The user lives in Porto.")
    MemorySource.objects.create(memory=memory, event=EventRecord.objects.get())
    return user


def _tables_with_rows() -> list[str]:
    return [
        model._meta.db_table
        for model in apps.get_models()
        if model._meta.managed and model._default_manager.exists()
    ]


def test_a_flush_empties_tables_that_reference_one_another_without_truncate(requires_postgres):
    _rows_linked_across_tables()

    with CaptureQueriesContext(connection) as queries:
        # As Django's TransactionTestCase calls it after each test.
        call_command(
            "flush",
            interactive=False,
            inhibit_post_migrate=True,
            reset_sequences=False,
            verbosity=0,
        )

    assert _tables_with_rows() == []
    statements = [query["sql"] for query in queries.captured_queries]
    assert any(sql.startswith("DELETE FROM") for sql in statements)
    assert not any("TRUNCATE" in sql for sql in statements)


def test_a_flush_that_resets_sequences_is_djangos_truncate(requires_postgres):
    _rows_linked_across_tables()

    with CaptureQueriesContext(connection) as queries:
        call_command(
            "flush", interactive=False, inhibit_post_migrate=True, reset_sequences=True, verbosity=0
        )

    assert _tables_with_rows() == []
    assert any("TRUNCATE" in query["sql"] for query in queries.captured_queries)
