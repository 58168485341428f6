"""Data migrations of the session store: every stored row stays, under the same id, and
finds what it belongs to."""

import importlib

import pytest

from sessions_app import selectors, services
from sessions_app.selectors.search import chats_search
from tests.migration_steps import migrated_to, migrated_to_latest

BEFORE = [
    ("sessions_app", "0009_event_memory_excluded"),
    ("memory_app", "0009_memory_settings_past_chats"),
    ("agents_app", "0005_app_provider"),
]
AFTER = [("sessions_app", "0010_session_ids_per_app_user"), *BEFORE[1:]]


@pytest.mark.django_db(transaction=True)
def test_sessions_stored_with_global_ids_keep_everything_under_the_same_id():
    old = migrated_to(BEFORE)
    try:
        user = old.get_model("auth", "User").objects.create(username="before")
        session = old.get_model("sessions_app", "SessionRecord").objects.create(
            id="first-chat", app_name="chat", user_id=user.pk, last_update_time=1.0, title="Trip"
        )
        event = old.get_model("sessions_app", "EventRecord").objects.create(
            session=session,
            sequence=1,
            event_id="e-1",
            author="user",
            timestamp=1.0,
            content={"role": "user", "parts": [{"text": "Pack the sunscreen"}]},
        )
        old.get_model("sessions_app", "SessionState").objects.create(
            session=session, key="plan", value="beach"
        )
        old.get_model("sessions_app", "ArtifactRecord").objects.create(
            id="00000000-0000-0000-0000-000000000001",
            app_name="chat",
            user_id=user.pk,
            session=session,
            filename="notes.txt",
            version=0,
            storage_name="before/notes",
            mime_type="text/plain",
            size=1,
            sha256="0" * 64,
            create_time=1.0,
        )
        memory = old.get_model("memory_app", "Memory").objects.create(
            app_name="chat",
            scope="session",
            user_id=user.pk,
            session=session,
            text="Going to the beach",
            source_type="explicit",
        )
        old.get_model("memory_app", "MemorySource").objects.create(memory=memory, event=event)
        old.get_model("memory_app", "MemoryWatermark").objects.create(
            session=session, last_sequence=1
        )
        old.get_model("agents_app", "TurnClaim").objects.create(
            session=session,
            user_event_id="e-1",
            holder="h",
            fence=1,
            created_at=1.0,
            renewed_at=1.0,
        )

        new = migrated_to(AFTER)
    finally:
        migrated_to_latest()

    record = new.get_model("sessions_app", "SessionRecord").objects.get()
    assert (record.key, record.session_id, record.title) == ("first-chat", "first-chat", "Trip")
    assert [e.event_id for e in new.get_model("sessions_app", "EventRecord").objects.all()] == [
        "e-1"
    ]
    read = selectors.session_get(app_name="chat", user_id=str(user.pk), session_id="first-chat")
    assert read.state == {"plan": "beach"}
    assert [e.id for e in read.events] == ["e-1"]
    assert selectors.artifact_keys_list(
        app_name="chat", user_id=str(user.pk), session_id="first-chat"
    ) == ["notes.txt"]
    kept = new.get_model("memory_app", "Memory").objects.get()
    assert kept.session_id == record.key
    assert new.get_model("memory_app", "MemorySource").objects.get().event.session_id == record.key
    assert new.get_model("memory_app", "MemoryWatermark").objects.get().session_id == record.key
    assert new.get_model("agents_app", "TurnClaim").objects.get().session_id == record.key
    hits = chats_search(user_pk=user.pk, app_name="chat", query="sunscreen")
    assert [hit.session_id for hit in hits] == ["first-chat"]

    other = services.session_create(
        app_name="chat",
        user_id=str(new.get_model("auth", "User").objects.create(username="after").pk),
        session_id="first-chat",
    )
    assert other.id == "first-chat" and other.state == {}


@pytest.mark.django_db(transaction=True)
def test_events_stored_before_their_owner_was_kept_on_them_get_it_and_are_found(monkeypatch):
    """Migration 0013 copies each stored event's session owner onto it, in batches (of one
    event here, so that a batch boundary falls between every two), and the search finds
    them through it."""
    migration = importlib.import_module("sessions_app.migrations.0014_event_owner")
    monkeypatch.setattr(migration, "BATCH", 1)
    old = migrated_to([("sessions_app", "0012_event_search_vector")])
    try:
        users = old.get_model("auth", "User").objects
        sessions = old.get_model("sessions_app", "SessionRecord").objects
        events = old.get_model("sessions_app", "EventRecord").objects
        owners = [(users.create(username="ana"), "chat"), (users.create(username="bo"), "notes")]
        for number, (user, app_name) in enumerate(owners * 2):
            session = sessions.create(
                key=f"key-{number}",
                session_id=f"chat-{number}",
                app_name=app_name,
                user_id=user.pk,
                last_update_time=1.0,
                last_sequence=1,
            )
            events.create(
                session=session,
                sequence=1,
                event_id=f"e-{number}",
                author="user",
                timestamp=float(number),
                content={"role": "user", "parts": [{"text": f"Sunscreen {number}"}]},
            )
        new = migrated_to([("sessions_app", "0014_event_owner")])
    finally:
        migrated_to_latest()

    stored = new.get_model("sessions_app", "EventRecord").objects.order_by("event_id")
    assert [(e.event_id, e.user_id, e.app_name) for e in stored] == [
        ("e-0", owners[0][0].pk, "chat"),
        ("e-1", owners[1][0].pk, "notes"),
        ("e-2", owners[0][0].pk, "chat"),
        ("e-3", owners[1][0].pk, "notes"),
    ]
    hits = chats_search(user_pk=owners[1][0].pk, app_name="notes", query="sunscreen")
    assert [hit.session_id for hit in hits] == ["chat-3", "chat-1"]
