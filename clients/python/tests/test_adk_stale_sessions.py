"""ADK's stale-session check, opt-in on the remote service (``stale_check=True``), side by
side with ADK's own DatabaseSessionService, which always makes it."""

from __future__ import annotations

import uuid

import pytest
from conftest import SEMANTICS_APP
from google.adk.errors import StaleSessionError
from google.adk.events import Event
from google.adk.sessions import DatabaseSessionService, Session
from google.genai import types

from agent_memory_client.adk import RemoteSessionService

APP = SEMANTICS_APP


def said(text: str) -> Event:
    return Event(
        invocation_id=f"e-{uuid.uuid4().hex[:8]}",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


@pytest.fixture(params=["database", "remote"])
async def service(request, tmp_path):
    if request.param == "database":
        opened = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
    else:
        server = request.getfixturevalue("server")
        opened = RemoteSessionService(
            base_url=server.base_url, api_key=server.key(APP), stale_check=True
        )
    yield opened
    await opened.close()


async def _texts(service, user_id: str, session_id: str) -> list[str]:
    stored = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)
    return [event.content.parts[0].text for event in stored.events]


async def test_a_copy_older_than_the_stored_session_is_refused_and_stores_nothing(service, user_id):
    created = await service.create_session(app_name=APP, user_id=user_id, session_id="chat 1")
    first = await service.get_session(app_name=APP, user_id=user_id, session_id=created.id)
    second = await service.get_session(app_name=APP, user_id=user_id, session_id=created.id)

    await service.append_event(first, said("from the first writer"))
    await service.append_event(first, said("and again"))
    with pytest.raises(StaleSessionError, match="reload the session"):
        await service.append_event(second, said("from the second writer"))

    assert await _texts(service, user_id, created.id) == ["from the first writer", "and again"]
    assert [event.content.parts[0].text for event in second.events] == []
    reloaded = await service.get_session(app_name=APP, user_id=user_id, session_id=created.id)
    await service.append_event(reloaded, said("after a reload"))
    assert (await _texts(service, user_id, created.id))[-1] == "after a reload"


async def test_a_session_object_made_by_hand_is_judged_by_its_newest_event(service, user_id):
    await service.create_session(app_name=APP, user_id=user_id, session_id="by-hand")
    by_hand = Session(id="by-hand", app_name=APP, user_id=user_id)

    appended = await service.append_event(by_hand, said("first"))
    assert await _texts(service, user_id, "by-hand") == ["first"]

    with pytest.raises(StaleSessionError):
        await service.append_event(
            Session(id="by-hand", app_name=APP, user_id=user_id), said("knows nothing")
        )
    up_to_date = Session(id="by-hand", app_name=APP, user_id=user_id, events=[appended])
    await service.append_event(up_to_date, said("knows the newest"))
    assert await _texts(service, user_id, "by-hand") == ["first", "knows the newest"]


async def test_without_stale_check_concurrent_writers_are_merged(server, user_id):
    service = RemoteSessionService(base_url=server.base_url, api_key=server.key(APP))
    try:
        created = await service.create_session(app_name=APP, user_id=user_id)
        first = await service.get_session(app_name=APP, user_id=user_id, session_id=created.id)
        second = await service.get_session(app_name=APP, user_id=user_id, session_id=created.id)

        await service.append_event(first, said("one"))
        await service.append_event(second, said("two"))

        assert await _texts(service, user_id, created.id) == ["one", "two"]
    finally:
        await service.close()
