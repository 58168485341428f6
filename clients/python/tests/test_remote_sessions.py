"""What RemoteSessionService adds to ADK's semantics: the server's guarantees under concurrency."""

from __future__ import annotations

import asyncio

from conftest import SEMANTICS_APP
from fastapi.openapi.models import APIKey, APIKeyIn
from google.adk.auth.auth_tool import AuthConfig
from google.adk.events import Event, EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.tool_confirmation import ToolConfirmation
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


async def test_every_field_of_adks_event_comes_back_unchanged(server, user_id):
    """An event with the fields ADK 2.13's Event and EventActions carry: the server models
    some and keeps the rest as they came, so it reads back as ADK's own JSON gives it back
    (ADK's JSON of an auth scheme is its own: compared through it, not with the object)."""
    service = RemoteSessionService(base_url=server.base_url, api_key=server.key(SEMANTICS_APP))
    session = await service.create_session(app_name=SEMANTICS_APP, user_id=user_id)
    event = Event(
        invocation_id="e-full",
        author="support_agent",
        branch="root.support_agent",
        content=types.Content(role="model", parts=[types.Part(text="Your refund is approved.")]),
        model_version="gemini-2.5-flash-001",
        finish_reason=types.FinishReason.STOP,
        turn_complete=True,
        avg_logprobs=-0.125,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["refund policy"]),
        citation_metadata=types.CitationMetadata(
            citations=[types.Citation(start_index=0, end_index=11, uri="https://example.com/p")]
        ),
        input_transcription=types.Transcription(text="is my refund approved", finished=True),
        output_transcription=types.Transcription(text="your refund is approved", finished=True),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=40, candidates_token_count=6, total_token_count=46
        ),
        interaction_id="interaction-7",
        custom_metadata={"ticket": {"id": 42, "tags": ["refund", "vip"]}},
        long_running_tool_ids={"call-9"},
        actions=EventActions(
            state_delta={"refund": "approved", "user:refunds": 1, "app:refunds_today": 3},
            artifact_delta={"receipt.pdf": 2},
            requested_auth_configs={
                "call-3": AuthConfig(auth_scheme=APIKey(**{"in": APIKeyIn.header, "name": "X-Key"}))
            },
            requested_tool_confirmations={
                "call-9": ToolConfirmation(hint="Refund 120 EUR?", payload={"amount": 120})
            },
            transfer_to_agent="billing_agent",
            transfer_reason="the customer asked for an invoice",
            escalate=False,
            end_of_agent=True,
            agent_state={"step": 3, "pending": ["invoice"]},
            skip_summarization=True,
        ),
    )
    sent = Event.model_validate_json(event.model_dump_json(exclude_none=True)).model_dump(
        mode="json"
    )

    await service.append_event(session, event)
    stored = await service.get_session(
        app_name=SEMANTICS_APP, user_id=user_id, session_id=session.id
    )
    await service.close()

    assert [read.model_dump(mode="json") for read in stored.events] == [sent]
    read = stored.events[0]
    assert read.model_version == "gemini-2.5-flash-001"
    assert read.actions.artifact_delta == {"receipt.pdf": 2}
    assert read.actions.requested_tool_confirmations["call-9"].payload == {"amount": 120}
    assert read.actions.requested_auth_configs["call-3"].credential_key == (
        event.actions.requested_auth_configs["call-3"].credential_key
    )
    assert read.grounding_metadata.web_search_queries == ["refund policy"]
