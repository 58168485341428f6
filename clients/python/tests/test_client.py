"""The plain async client against the real server: what a non-ADK caller sees."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from conftest import SEMANTICS_APP

from agent_memory_client import (
    AgentMemoryClient,
    AppNotFoundError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    TransportError,
)

APP = SEMANTICS_APP


def message(text: str, *, author: str = "user", **fields) -> dict:
    role = "user" if author == "user" else "model"
    return {
        "id": uuid.uuid4().hex,
        "invocation_id": f"e-{uuid.uuid4().hex[:8]}",
        "author": author,
        "content": {"role": role, "parts": [{"text": text}]},
        **fields,
    }


async def test_a_session_lives_through_its_routes(client, user_id):
    created = await client.create_session(
        app_name=APP, user_id=user_id, state={"topic": "x", "temp:t": 1}
    )
    assert created["events"] == []
    assert created["user_id"] == user_id
    assert "temp:t" not in created["state"]

    appended = await client.append_event(
        app_name=APP,
        user_id=user_id,
        session_id=created["id"],
        event=message("hello", actions={"state_delta": {"seen": True, "temp:x": 1}}),
    )
    assert appended["event"]["content"]["parts"][0]["text"] == "hello"
    assert appended["event"]["actions"]["state_delta"] == {"seen": True}
    assert appended["last_update_time"] >= created["last_update_time"]

    fetched = await client.get_session(app_name=APP, user_id=user_id, session_id=created["id"])
    own_state = {key: value for key, value in fetched["state"].items() if ":" not in key}
    assert own_state == {"topic": "x", "seen": True}
    assert [event["id"] for event in fetched["events"]] == [appended["event"]["id"]]

    await client.delete_session(app_name=APP, user_id=user_id, session_id=created["id"])
    with pytest.raises(NotFoundError):
        await client.get_session(app_name=APP, user_id=user_id, session_id=created["id"])


async def test_every_page_of_sessions_is_walked(client, user_id):
    made = {(await client.create_session(app_name=APP, user_id=user_id))["id"] for _ in range(5)}

    page = await client.list_sessions(app_name=APP, user_id=user_id, page_size=2)
    walked = [
        session["id"]
        async for session in client.iter_sessions(app_name=APP, user_id=user_id, page_size=2)
    ]

    assert len(page["sessions"]) == 2
    assert page["next_page_token"]
    assert sorted(walked) == sorted(made)


async def test_errors_are_the_matching_exceptions(client, server, user_id):
    session = await client.create_session(app_name=APP, user_id=user_id, session_id="fixed")
    with pytest.raises(ConflictError):
        await client.create_session(app_name=APP, user_id=user_id, session_id="fixed")
    with pytest.raises(NotFoundError):
        await client.get_session(app_name=APP, user_id=user_id, session_id="no-such-session")
    with pytest.raises(BadRequestError) as refused:
        await client.append_event(
            app_name=APP,
            user_id=user_id,
            session_id=session["id"],
            event=message("streaming", partial=True),
        )
    assert refused.value.detail
    with pytest.raises(AppNotFoundError) as wrong_app:
        await client.get_session(app_name="another-app", user_id=user_id, session_id="fixed")
    assert wrong_app.value.app_name == "another-app"
    assert not isinstance(wrong_app.value, NotFoundError)

    async with AgentMemoryClient(base_url=server.base_url, api_key="not-a-key") as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.list_sessions(app_name=APP, user_id=user_id)


async def test_a_key_without_the_scope_is_refused_and_writes_nothing(server, client, user_id):
    session = await client.create_session(app_name=APP, user_id=user_id)
    async with AgentMemoryClient(
        base_url=server.base_url, api_key=server.key(APP, ("sessions:read",))
    ) as reader:
        await reader.get_session(app_name=APP, user_id=user_id, session_id=session["id"])
        with pytest.raises(PermissionDeniedError) as refused:
            await reader.append_event(
                app_name=APP, user_id=user_id, session_id=session["id"], event=message("hi")
            )
        assert "sessions:write" in refused.value.detail
        with pytest.raises(PermissionDeniedError):
            await reader.delete_user(app_name=APP, user_id=user_id)

    stored = await client.get_session(app_name=APP, user_id=user_id, session_id=session["id"])
    assert stored["events"] == []


async def test_a_stated_memory_is_searched_found_and_deleted(client, user_id):
    added = await client.add_memory(
        app_name=APP, user_id=user_id, text="The user is allergic to peanuts.", topic="health"
    )

    found = await client.search_memory(app_name=APP, user_id=user_id, query="peanut allergy")
    assert [memory["id"] for memory in found][:1] == [added["id"]]
    assert found[0]["score"] > 0
    assert (
        await client.search_memory(app_name=APP, user_id=f"other-{user_id}", query="peanut") == []
    )

    await client.delete_memory(app_name=APP, user_id=user_id, memory_id=added["id"])
    assert await client.search_memory(app_name=APP, user_id=user_id, query="peanut allergy") == []


async def test_a_generation_job_is_followed_to_its_end(client, user_id):
    session = await client.create_session(app_name=APP, user_id=user_id)
    await client.append_event(
        app_name=APP,
        user_id=user_id,
        session_id=session["id"],
        event=message("My favourite drink is oolong tea."),
    )

    job = await client.generate_memories(app_name=APP, user_id=user_id, session_id=session["id"])
    assert job["status"] in {"queued", "running", "done"}
    done = await client.wait_for_job(app_name=APP, job_id=job["job_id"], timeout=90)

    assert done["status"] == "done"
    found = await client.search_memory(app_name=APP, user_id=user_id, query="favourite drink")
    assert any("oolong" in memory["text"] for memory in found)
    assert found[0]["sources"][0]["session_id"] == session["id"]


async def test_app_memories_are_shared_knowledge(client):
    text = f"Refunds take {uuid.uuid4().int % 90 + 3} business days."
    added = await client.add_app_memory(app_name=APP, text=text, topic="procedures")

    listed = await client.list_app_memories(app_name=APP)
    assert text in str(listed)

    await client.delete_app_memory(app_name=APP, memory_id=added["id"])
    assert text not in str(await client.list_app_memories(app_name=APP))


async def test_one_client_serves_several_event_loops_one_after_another(server, user_id):
    shared = AgentMemoryClient(base_url=server.base_url, api_key=server.key(APP))

    async def create() -> str:
        try:
            return (await shared.create_session(app_name=APP, user_id=user_id))["id"]
        finally:
            await shared.aclose()

    first = await asyncio.to_thread(asyncio.run, create())
    second = await asyncio.to_thread(asyncio.run, create())
    assert first != second


async def test_an_unreachable_server_is_a_transport_error():
    async with AgentMemoryClient(
        base_url="http://127.0.0.1:9", api_key="key", retries=1
    ) as nowhere:
        with pytest.raises(TransportError):
            await nowhere.list_sessions(app_name=APP, user_id="anyone")


def test_bad_arguments_are_refused_before_anything_is_sent():
    with pytest.raises(ValueError, match="http"):
        AgentMemoryClient(base_url="memory.example.com", api_key="key")
    with pytest.raises(ValueError, match="api_key"):
        AgentMemoryClient(base_url="http://memory.example.com", api_key="")
