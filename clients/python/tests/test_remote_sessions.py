"""What RemoteSessionService adds to ADK's semantics: the server's guarantees under concurrency."""

from __future__ import annotations

import asyncio

from conftest import SEMANTICS_APP
from google.adk.events import Event, EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agent_memory_client.adk import RemoteSessionService

WRITERS = 16
EVENTS_PER_WRITER = 25


async def test_concurrent_writers_with_their_own_copies_lose_nothing(server, user_id):
    """Each writer is a service of its own (its own connections) holding its own copy of the
    session, loaded before any write, as separate workers would; ADK's database service
    refuses such appends as stale, the server serialises them and keeps every event and
    every state key."""
    services = [
        RemoteSessionService(base_url=server.base_url, api_key=server.key(SEMANTICS_APP))
        for _ in range(WRITERS)
    ]
    created = await services[0].create_session(app_name=SEMANTICS_APP, user_id=user_id)
    copies = [
        await service.get_session(
            app_name=SEMANTICS_APP,
            user_id=user_id,
            session_id=created.id,
            config=GetSessionConfig(num_recent_events=0),
        )
        for service in services
    ]

    async def writer(number: int) -> None:
        for index in range(EVENTS_PER_WRITER):
            await services[number].append_event(
                copies[number],
                Event(
                    invocation_id=f"e-writer-{number}",
                    author=f"writer_{number}",
                    content=types.Content(
                        role="model", parts=[types.Part(text=f"writer {number} event {index}")]
                    ),
                    actions=EventActions(
                        state_delta={f"writer_{number}": index, f"user:writer_{number}": index}
                    ),
                ),
            )

    await asyncio.gather(*(writer(number) for number in range(WRITERS)))

    stored = await services[0].get_session(
        app_name=SEMANTICS_APP, user_id=user_id, session_id=created.id
    )
    for service in services:
        await service.close()
    assert len(stored.events) == WRITERS * EVENTS_PER_WRITER
    for number in range(WRITERS):
        own = [event for event in stored.events if event.author == f"writer_{number}"]
        assert [event.content.parts[0].text for event in own] == [
            f"writer {number} event {index}" for index in range(EVENTS_PER_WRITER)
        ]
        assert stored.state[f"writer_{number}"] == EVENTS_PER_WRITER - 1
        assert stored.state[f"user:writer_{number}"] == EVENTS_PER_WRITER - 1
    assert len({event.id for event in stored.events}) == len(stored.events)
