"""What reading a session costs the database: its statements and round trips."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from google.genai import types

from sessions_app import selectors, services
from sessions_app.events import Event, EventActions, EventCompaction
from sessions_app.types import GetSessionConfig
from tests.factories import UserFactory

APP = "demo"


def _session_with_events(count: int):
    user = UserFactory()
    session = services.session_create(
        app_name=APP, user_id=str(user.pk), state={"topic": "trains", "user:name": "Ada"}
    )
    for number in range(count):
        event = Event(
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=f"message {number}")]),
            actions=EventActions(state_delta={"turn": number}),
        )
        services.event_append(session=session, event=event)
    return user, session


@pytest.mark.django_db
@pytest.mark.parametrize("recent", [None, 3])
def test_get_session_is_one_round_trip_on_postgresql(recent):
    user, session = _session_with_events(5)
    config = GetSessionConfig(num_recent_events=recent)

    with CaptureQueriesContext(connection) as queries:
        stored = selectors.session_get(
            app_name=APP, user_id=str(user.pk), session_id=session.id, config=config
        )

    # PostgreSQL gets the session's states and its events in one query; SQLite,
    # in-process, runs the two statements one after the other.
    assert len(queries) == (1 if connection.vendor == "postgresql" else 2)
    expected = [f"message {number}" for number in range(5)][-(recent or 5) :]
    assert [event.text() for event in stored.events] == expected
    assert stored.state == {"topic": "trains", "user:name": "Ada", "turn": 4}


@pytest.mark.django_db
def test_get_session_without_events_reads_only_the_session():
    user, session = _session_with_events(2)

    with CaptureQueriesContext(connection) as queries:
        stored = selectors.session_get(
            app_name=APP,
            user_id=str(user.pk),
            session_id=session.id,
            config=GetSessionConfig(num_recent_events=0),
        )

    assert len(queries) == 1
    assert stored.events == [] and stored.state["turn"] == 1


@pytest.mark.django_db
def test_another_users_session_reads_as_absent():
    _, session = _session_with_events(2)
    stranger = UserFactory()

    with CaptureQueriesContext(connection) as queries:
        stored = selectors.session_get(
            app_name=APP, user_id=str(stranger.pk), session_id=session.id
        )

    assert stored is None
    assert len(queries) == (1 if connection.vendor == "postgresql" else 2)


def _text_event(text: str, *, invocation_id: str, timestamp: float) -> Event:
    return Event(
        author="user",
        invocation_id=invocation_id,
        timestamp=timestamp,
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def _compaction_event(*, invocation_id: str, end_timestamp: float, timestamp: float) -> Event:
    summary = types.Content(role="model", parts=[types.Part(text="they talked of trains")])
    return Event(
        author="user",
        invocation_id=invocation_id,
        timestamp=timestamp,
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=0.0, end_timestamp=end_timestamp, compacted_content=summary
            )
        ),
    )


@pytest.mark.django_db
def test_a_turns_read_takes_the_events_from_the_latest_compactions_end_in_one_round_trip():
    user = UserFactory()
    session = services.session_create(app_name=APP, user_id=str(user.pk))
    for number, at in enumerate([100.0, 101.0, 102.0, 103.0]):
        services.event_append(
            session=session,
            event=_text_event(f"message {number}", invocation_id=f"i{number}", timestamp=at),
        )
    services.event_append(
        session=session,
        event=_compaction_event(invocation_id="c1", end_timestamp=102.0, timestamp=103.5),
    )

    with CaptureQueriesContext(connection) as queries:
        compaction, stored = selectors.store_read_run(
            selectors.session_since_compaction_read(
                app_name=APP, user_id=str(user.pk), session_id=session.id, max_events=50
            )
        )

    assert compaction.actions.compaction.end_timestamp == 102.0
    assert [event.text() or "summary" for event in stored.events] == [
        "message 2",
        "message 3",
        "summary",
    ]
    assert len(queries) == (1 if connection.vendor == "postgresql" else 3)


@pytest.mark.django_db
def test_a_compaction_a_rewind_took_out_no_longer_hides_the_events_it_covered():
    user = UserFactory()
    session = services.session_create(app_name=APP, user_id=str(user.pk))
    for number, at in enumerate([100.0, 101.0]):
        services.event_append(
            session=session,
            event=_text_event(f"message {number}", invocation_id=f"i{number}", timestamp=at),
        )
    services.event_append(
        session=session,
        event=_compaction_event(invocation_id="c1", end_timestamp=101.0, timestamp=101.5),
    )
    services.session_rewind(
        app_name=APP, user_id=str(user.pk), session_id=session.id, rewind_before_invocation_id="c1"
    )

    compaction, stored = selectors.store_read_run(
        selectors.session_since_compaction_read(
            app_name=APP, user_id=str(user.pk), session_id=session.id, max_events=50
        )
    )

    assert compaction is None
    assert [event.text() for event in stored.events if event.text()] == ["message 0", "message 1"]


@pytest.mark.django_db
def test_a_turns_read_of_another_users_session_reads_as_absent():
    _, session = _session_with_events(2)
    stranger = UserFactory()

    answer = selectors.store_read_run(
        selectors.session_since_compaction_read(
            app_name=APP, user_id=str(stranger.pk), session_id=session.id, max_events=50
        )
    )

    assert answer == (None, None)
