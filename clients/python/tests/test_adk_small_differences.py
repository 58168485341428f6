"""The smaller places where the remote service and ADK's own services part, side by side:
each either matches ADK's DatabaseSessionService or is a difference the README lists."""

from __future__ import annotations

import base64
import time

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event, EventActions


def _event(name: str, **fields) -> Event:
    return Event(author="user", invocation_id=f"e-{name}", custom_metadata={"n": name}, **fields)


async def test_last_update_time_is_the_newest_events_timestamp(subject, user_id):
    service, app = subject.service, subject.app_name
    session = await service.create_session(app_name=app, user_id=user_id)
    later = session.last_update_time + 100.0

    await service.append_event(session, _event("later", timestamp=later))
    stored = await service.get_session(app_name=app, user_id=user_id, session_id=session.id)

    assert session.last_update_time == pytest.approx(later, abs=1e-6)
    assert stored.last_update_time == pytest.approx(later, abs=1e-6)


async def test_events_appended_out_of_timestamp_order(subject, user_id):
    """ADK's database service sorts by timestamp and takes the last append's timestamp as
    the session's; the in-memory service keeps append order. The remote keeps append order
    and the newest timestamp (README: differences)."""
    service, app = subject.service, subject.app_name
    session = await service.create_session(app_name=app, user_id=user_id)
    now = time.time()

    await service.append_event(session, _event("late", timestamp=now + 10))
    await service.append_event(session, _event("early", timestamp=now + 5))
    stored = await service.get_session(app_name=app, user_id=user_id, session_id=session.id)

    order = [event.custom_metadata["n"] for event in stored.events]
    if subject.name == "database":
        assert order == ["early", "late"]
        assert stored.last_update_time == pytest.approx(now + 5, abs=1e-6)
    elif subject.name == "in_memory":
        assert order == ["late", "early"]
        assert stored.last_update_time == pytest.approx(now + 5, abs=1e-6)
    else:
        assert order == ["late", "early"]
        assert stored.last_update_time == pytest.approx(now + 10, abs=1e-6)


async def test_bytes_in_a_state_delta(subject, user_id):
    """The session object keeps the bytes everywhere; read back, ADK's database service
    gives UTF-8 text, the in-memory one the bytes, the remote base64 text of any bytes."""
    service, app = subject.service, subject.app_name
    session = await service.create_session(app_name=app, user_id=user_id)

    await service.append_event(
        session, _event("blob", actions=EventActions(state_delta={"blob": b"abc"}))
    )
    stored = await service.get_session(app_name=app, user_id=user_id, session_id=session.id)

    assert session.state["blob"] == b"abc"
    expected = {"database": "abc", "in_memory": b"abc", "remote": base64.b64encode(b"abc").decode()}
    assert stored.state["blob"] == expected[subject.name]


async def test_a_duplicate_event_id(subject, user_id):
    """ADK's database service refuses it with its database's IntegrityError, the in-memory
    one stores it twice; the remote refuses it with ADK's AlreadyExistsError (README:
    differences) and stores nothing."""
    service, app = subject.service, subject.app_name
    session = await service.create_session(app_name=app, user_id=user_id)
    first = await service.append_event(session, _event("first", id="same-id"))

    if subject.name == "in_memory":
        await service.append_event(session, _event("again", id=first.id))
        stored = await service.get_session(app_name=app, user_id=user_id, session_id=session.id)
        assert [event.custom_metadata["n"] for event in stored.events] == ["first", "again"]
        return
    with pytest.raises(Exception) as refused:
        await service.append_event(session, _event("again", id=first.id))
    stored = await service.get_session(app_name=app, user_id=user_id, session_id=session.id)

    assert [event.custom_metadata["n"] for event in stored.events] == ["first"]
    if subject.name == "remote":
        assert isinstance(refused.value, AlreadyExistsError)
    else:
        assert type(refused.value).__name__ == "IntegrityError"
