"""RemoteMemoryService as ADK code calls it: BaseMemoryService's methods, ADK's own objects."""

from __future__ import annotations

import uuid

import pytest
from conftest import SEMANTICS_APP
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event
from google.adk.memory import InMemoryMemoryService
from google.adk.memory.base_memory_service import SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions import DatabaseSessionService, Session
from google.genai import types

from agent_memory_client.adk import RemoteSessionService

APP = SEMANTICS_APP


def entry(text: str, **metadata) -> MemoryEntry:
    return MemoryEntry(
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        custom_metadata=metadata,
    )


def user_message(text: str) -> Event:
    return Event(
        invocation_id=f"e-{uuid.uuid4().hex[:8]}",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def texts(response: SearchMemoryResponse) -> list[str]:
    return [memory.content.parts[0].text for memory in response.memories]


async def test_added_memories_are_found_as_adk_memory_entries(memory_service, user_id):
    await memory_service.add_memory(
        app_name=APP,
        user_id=user_id,
        memories=[entry("The user prefers window seats.", topic="preferences")],
        custom_metadata={"origin": "crm-import"},
    )

    found = await memory_service.search_memory(app_name=APP, user_id=user_id, query="window seat")

    assert isinstance(found, SearchMemoryResponse)
    first = found.memories[0]
    assert isinstance(first, MemoryEntry)
    assert first.content.parts[0].text == "The user prefers window seats."
    assert first.content.role == "user"
    assert first.id
    assert first.timestamp
    assert first.custom_metadata["score"] > 0
    assert first.custom_metadata["topic"] == "preferences"


async def test_memories_are_the_end_users_own(memory_service, user_id):
    await memory_service.add_memory(
        app_name=APP, user_id=user_id, memories=[entry("The user's locker code is 4711.")]
    )

    other = await memory_service.search_memory(
        app_name=APP, user_id=f"other-{user_id}", query="locker code"
    )
    assert other.memories == []


async def test_delete_memory_forgets_it_and_an_unknown_id_is_a_no_op(memory_service, user_id):
    await memory_service.add_memory(
        app_name=APP, user_id=user_id, memories=[entry("The user's cat is named Miso.")]
    )
    found = await memory_service.search_memory(app_name=APP, user_id=user_id, query="cat name")

    await memory_service.delete_memory(
        app_name=APP, user_id=user_id, memory_id=found.memories[0].id
    )
    await memory_service.delete_memory(app_name=APP, user_id=user_id, memory_id="no-such-memory")
    await memory_service.delete_memory(app_name=APP, user_id=user_id, memory_id=None)

    after = await memory_service.search_memory(app_name=APP, user_id=user_id, query="cat name")
    assert "The user's cat is named Miso." not in texts(after)


async def test_an_entry_without_text_is_refused(memory_service, user_id):
    with pytest.raises(ValueError, match="text"):
        await memory_service.add_memory(
            app_name=APP,
            user_id=user_id,
            memories=[MemoryEntry(content=types.Content(role="user", parts=[]))],
        )


async def test_events_added_to_memory_become_facts(memory_service, user_id):
    sport = f"curling{uuid.uuid4().hex[:5]}"
    await memory_service.add_events_to_memory(
        app_name=APP,
        user_id=user_id,
        events=[user_message(f"My favourite sport is {sport}.")],
        custom_metadata={"wait_for_completion": True},
    )

    found = await memory_service.search_memory(
        app_name=APP, user_id=user_id, query="favourite sport"
    )
    assert any(sport in text for text in texts(found))


async def test_a_session_the_server_does_not_store_is_a_clear_error(memory_service, user_id):
    kept_elsewhere = Session(id="kept-elsewhere", app_name=APP, user_id=user_id)

    with pytest.raises(SessionNotFoundError, match="kept-elsewhere"):
        await memory_service.add_session_to_memory(kept_elsewhere)


@pytest.fixture(params=["adk", "remote"])
async def services(request, server, memory_service, tmp_path):
    """ADK's own DatabaseSessionService and InMemoryMemoryService, then the remote pair."""
    if request.param == "adk":
        sessions = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
        yield sessions, InMemoryMemoryService()
    else:
        sessions = RemoteSessionService(base_url=server.base_url, api_key=server.key(APP))
        yield sessions, memory_service
    await sessions.close()


async def test_events_added_to_memory_feed_memory_only_as_in_adk(services, user_id):
    """ADK's add_events_to_memory hands events to memory: they do not join the session's
    conversation, make no session and change no state, and memory finds them."""
    sessions, memory = services
    session = await sessions.create_session(app_name=APP, user_id=user_id, session_id="chat 1")
    said = await sessions.append_event(session, user_message("Hello there."))
    sport = f"curling{uuid.uuid4().hex[:5]}"
    given = user_message(f"My favourite sport is {sport}.")
    given.actions.state_delta = {"user:sport": sport}

    await memory.add_events_to_memory(
        app_name=APP,
        user_id=user_id,
        events=[said, given],
        session_id=session.id,
        custom_metadata={"wait_for_completion": True},
    )
    await memory.add_events_to_memory(
        app_name=APP,
        user_id=user_id,
        events=[user_message(f"I also like {sport} on ice.")],
        custom_metadata={"wait_for_completion": True},
    )

    stored = await sessions.get_session(app_name=APP, user_id=user_id, session_id="chat 1")
    assert [event.id for event in stored.events] == [said.id]
    assert "user:sport" not in stored.state
    listed = await sessions.list_sessions(app_name=APP, user_id=user_id)
    assert [listed_session.id for listed_session in listed.sessions] == ["chat 1"]
    assert "sport" not in await sessions.get_user_state(app_name=APP, user_id=user_id)
    found = await memory.search_memory(app_name=APP, user_id=user_id, query=sport)
    assert any(sport in text for text in texts(found))
