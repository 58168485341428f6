"""ADK's documented session semantics, checked on ADK's own services and on RemoteSessionService.

Every test runs three times (``subject``): on ADK's InMemorySessionService,
on its DatabaseSessionService (SQLite), and on RemoteSessionService against
the real server. A test that passes on ADK's services states ADK's behaviour;
the remote service must show the same. (ADK's docs: "Session", "State":
prefixes, temp keys, merged state, last_update_time, GetSessionConfig, list,
delete, user isolation.)
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.sessions import Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agent_memory_client import AppNotFoundError


def text_event(text: str, *, author: str = "user", delta: dict | None = None, **fields) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        invocation_id=fields.pop("invocation_id", f"e-{uuid.uuid4().hex[:8]}"),
        author=author,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta or {}),
        **fields,
    )


def unique(prefix: str) -> str:
    """A state key no other test (or earlier run on the same app) has written."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def texts(session: Session) -> list[str]:
    return [event.content.parts[0].text for event in session.events]


async def test_create_session_answers_a_new_empty_session(subject, user_id):
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)

    assert session.id
    assert (session.app_name, session.user_id, session.events) == (subject.app_name, user_id, [])
    assert session.last_update_time > 0
    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert stored.id == session.id
    assert stored.events == []


async def test_a_chosen_session_id_is_kept_and_cannot_be_taken_twice(subject, user_id):
    session_id = unique("chosen-")
    session = await subject.service.create_session(
        app_name=subject.app_name, user_id=user_id, session_id=session_id
    )
    assert session.id == session_id

    with pytest.raises(AlreadyExistsError):
        await subject.service.create_session(
            app_name=subject.app_name, user_id=user_id, session_id=session_id
        )


async def test_initial_state_is_split_by_prefix_and_temp_keys_are_not_kept(subject, user_id):
    app_key, user_key = unique("app:"), unique("user:")
    state = {"topic": "billing", user_key: "Ada", app_key: 3, "temp:draft": "scratch"}

    session = await subject.service.create_session(
        app_name=subject.app_name, user_id=user_id, state=state
    )

    for view in (
        session,
        await subject.service.get_session(
            app_name=subject.app_name, user_id=user_id, session_id=session.id
        ),
    ):
        assert view.state["topic"] == "billing"
        assert view.state[user_key] == "Ada"
        assert view.state[app_key] == 3
        assert "temp:draft" not in view.state

    other_session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    assert other_session.state[user_key] == "Ada"
    assert other_session.state[app_key] == 3
    assert "topic" not in other_session.state

    other_user = await subject.service.create_session(
        app_name=subject.app_name, user_id=unique("other-user-")
    )
    assert other_user.state[app_key] == 3
    assert user_key not in other_user.state


async def test_append_event_applies_the_delta_to_each_scope(subject, user_id):
    app_key, user_key = unique("app:"), unique("user:")
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    sibling = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    stranger_id = unique("stranger-")
    stranger = await subject.service.create_session(app_name=subject.app_name, user_id=stranger_id)

    event = text_event(
        "I am Ada", delta={"mood": "curious", user_key: "Ada", app_key: {"plan": "pro"}}
    )
    returned = await subject.service.append_event(session, event)

    assert returned.id == event.id
    assert session.events[-1].id == event.id
    assert session.state["mood"] == "curious"
    assert session.state[user_key] == "Ada"
    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert stored.state["mood"] == "curious"
    assert stored.state[user_key] == "Ada"
    assert stored.state[app_key] == {"plan": "pro"}
    assert texts(stored) == ["I am Ada"]

    sibling_now = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=sibling.id
    )
    assert sibling_now.state[user_key] == "Ada"
    assert "mood" not in sibling_now.state
    stranger_now = await subject.service.get_session(
        app_name=subject.app_name, user_id=stranger_id, session_id=stranger.id
    )
    assert stranger_now.state[app_key] == {"plan": "pro"}
    assert user_key not in stranger_now.state


async def test_temp_state_lives_in_the_session_object_only(subject, user_id):
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    event = text_event("thinking", author="agent", delta={"temp:scratch": 41, "answer": 42})

    await subject.service.append_event(session, event)

    assert session.state["temp:scratch"] == 41
    assert session.state["answer"] == 42
    assert "temp:scratch" not in event.actions.state_delta
    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert "temp:scratch" not in stored.state
    assert stored.state["answer"] == 42
    assert stored.events[0].actions.state_delta == {"answer": 42}


async def test_a_none_value_in_a_delta_is_stored_as_a_value(subject, user_id):
    session = await subject.service.create_session(
        app_name=subject.app_name, user_id=user_id, state={"step": 1}
    )
    await subject.service.append_event(session, text_event("reset", delta={"step": None}))

    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert "step" in stored.state
    assert stored.state["step"] is None


async def test_last_update_time_follows_the_appends(subject, user_id):
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    created = session.last_update_time

    await subject.service.append_event(session, text_event("first"))
    first = session.last_update_time
    await subject.service.append_event(session, text_event("second"))

    assert created <= first <= session.last_update_time
    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert stored.last_update_time == pytest.approx(session.last_update_time, abs=1e-3)


async def test_events_come_back_as_they_were_appended(subject, user_id):
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    call = text_event("", author="assistant")
    call.content = types.Content(
        role="model",
        parts=[types.Part(function_call=types.FunctionCall(id="call-1", name="lookup", args={}))],
    )
    call.long_running_tool_ids = {"call-1"}
    response = Event(
        invocation_id=call.invocation_id,
        author="assistant",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1", name="lookup", response={"rows": [1, 2], "ok": True}
                    )
                )
            ],
        ),
        actions=EventActions(
            skip_summarization=True, artifact_delta={"report.txt": 2}, transfer_to_agent="billing"
        ),
    )
    reply = text_event(
        "Done: ✓ ünïcode",
        author="assistant",
        invocation_id=call.invocation_id,
        branch="root.assistant",
        custom_metadata={"trace": {"span": 7}},
        turn_complete=True,
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=12, candidates_token_count=3, total_token_count=15
        ),
        error_code=None,
    )
    for event in (call, response, reply):
        await subject.service.append_event(session, event)

    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert [event.model_dump(mode="json") for event in stored.events] == [
        event.model_dump(mode="json") for event in (call, response, reply)
    ]


async def test_partial_events_are_returned_but_not_stored(subject, user_id):
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    partial = text_event("Hel", author="assistant", partial=True)

    returned = await subject.service.append_event(session, partial)

    assert returned is partial
    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert stored.events == []


async def _session_with_events(subject, user_id: str, count: int) -> tuple[Session, list[float]]:
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    stamps = []
    base = session.last_update_time + 1
    for index in range(count):
        event = text_event(f"message {index}", timestamp=base + index)
        await subject.service.append_event(session, event)
        stamps.append(event.timestamp)
    return session, stamps


@pytest.mark.parametrize(
    ("recent", "expected"),
    [(None, list(range(6))), (3, [3, 4, 5]), (1, [5]), (0, []), (50, list(range(6)))],
)
async def test_num_recent_events_keeps_the_last_events_oldest_first(
    subject, user_id, recent, expected
):
    session, _ = await _session_with_events(subject, user_id, 6)

    stored = await subject.service.get_session(
        app_name=subject.app_name,
        user_id=user_id,
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=recent),
    )

    assert texts(stored) == [f"message {index}" for index in expected]


async def test_after_timestamp_keeps_events_at_or_after_it(subject, user_id):
    session, stamps = await _session_with_events(subject, user_id, 5)

    stored = await subject.service.get_session(
        app_name=subject.app_name,
        user_id=user_id,
        session_id=session.id,
        config=GetSessionConfig(after_timestamp=stamps[2]),
    )
    assert texts(stored) == ["message 2", "message 3", "message 4"]

    both = await subject.service.get_session(
        app_name=subject.app_name,
        user_id=user_id,
        session_id=session.id,
        config=GetSessionConfig(after_timestamp=stamps[1], num_recent_events=2),
    )
    assert texts(both) == ["message 3", "message 4"]


async def test_get_session_answers_none_for_an_unknown_session(subject, user_id):
    assert (
        await subject.service.get_session(
            app_name=subject.app_name, user_id=user_id, session_id=unique("missing-")
        )
        is None
    )


async def test_an_end_user_never_reaches_another_users_session(subject, user_id):
    session, _ = await _session_with_events(subject, user_id, 2)
    intruder = unique("intruder-")
    await subject.service.create_session(app_name=subject.app_name, user_id=intruder)

    assert (
        await subject.service.get_session(
            app_name=subject.app_name, user_id=intruder, session_id=session.id
        )
        is None
    )
    listed = await subject.service.list_sessions(app_name=subject.app_name, user_id=intruder)
    assert session.id not in [listed_session.id for listed_session in listed.sessions]
    await subject.service.delete_session(
        app_name=subject.app_name, user_id=intruder, session_id=session.id
    )
    forged = session.model_copy(update={"user_id": intruder, "events": [], "state": {}})
    with pytest.raises(SessionNotFoundError):
        await subject.service.append_event(forged, text_event("let me in"))

    still = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert texts(still) == ["message 0", "message 1"]


async def test_another_app_name_does_not_reach_the_session(subject, user_id):
    """ADK's own services answer None; the server's key reaches one app, and a name it does
    not reach is a wrong app name, which the remote service says (naming it)."""
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    other_app = unique("another-app-")

    if subject.name == "remote":
        with pytest.raises(AppNotFoundError, match=other_app):
            await subject.service.get_session(
                app_name=other_app, user_id=user_id, session_id=session.id
            )
        return
    assert (
        await subject.service.get_session(
            app_name=other_app, user_id=user_id, session_id=session.id
        )
        is None
    )


async def test_list_sessions_lists_the_users_sessions_without_events(subject, user_id):
    user_key = unique("user:")
    first, _ = await _session_with_events(subject, user_id, 2)
    second = await subject.service.create_session(
        app_name=subject.app_name, user_id=user_id, state={"topic": "second", user_key: 1}
    )
    await subject.service.create_session(app_name=subject.app_name, user_id=unique("someone-"))

    listed = await subject.service.list_sessions(app_name=subject.app_name, user_id=user_id)

    assert {session.id for session in listed.sessions} == {first.id, second.id}
    assert all(session.events == [] for session in listed.sessions)
    assert all(session.user_id == user_id for session in listed.sessions)
    by_id = {session.id: session for session in listed.sessions}
    assert by_id[second.id].state["topic"] == "second"
    assert by_id[first.id].state[user_key] == 1
    times = [session.last_update_time for session in listed.sessions]
    assert times == sorted(times)


async def test_list_sessions_of_an_unknown_user_is_empty(subject):
    listed = await subject.service.list_sessions(
        app_name=subject.app_name, user_id=unique("nobody-")
    )
    assert listed.sessions == []


async def test_delete_session_removes_it_and_leaves_the_others(subject, user_id):
    doomed, _ = await _session_with_events(subject, user_id, 2)
    kept = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)

    await subject.service.delete_session(
        app_name=subject.app_name, user_id=user_id, session_id=doomed.id
    )

    assert (
        await subject.service.get_session(
            app_name=subject.app_name, user_id=user_id, session_id=doomed.id
        )
        is None
    )
    listed = await subject.service.list_sessions(app_name=subject.app_name, user_id=user_id)
    assert [session.id for session in listed.sessions] == [kept.id]
    await subject.service.delete_session(
        app_name=subject.app_name, user_id=user_id, session_id=doomed.id
    )
    with pytest.raises(SessionNotFoundError):
        await subject.service.append_event(doomed, text_event("anyone there?"))


async def test_get_user_state_answers_the_raw_keys(subject, user_id):
    name = unique("name")
    session = await subject.service.create_session(
        app_name=subject.app_name, user_id=user_id, state={f"user:{name}": "Ada", "local": 1}
    )
    await subject.service.append_event(session, text_event("hi", delta={"user:visits": 2}))

    assert await subject.service.get_user_state(app_name=subject.app_name, user_id=user_id) == {
        name: "Ada",
        "visits": 2,
    }
    assert (
        await subject.service.get_user_state(app_name=subject.app_name, user_id=unique("nobody-"))
        == {}
    )


async def test_appends_from_two_tasks_to_one_session_object_are_all_kept(subject, user_id):
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)

    async def writer(name: str) -> None:
        for index in range(10):
            await subject.service.append_event(
                session, text_event(f"{name} {index}", author=name, delta={name: index})
            )

    await asyncio.gather(writer("left"), writer("right"))

    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert len(stored.events) == 20
    assert (stored.state["left"], stored.state["right"]) == (9, 9)
    assert [event.id for event in stored.events] == [event.id for event in session.events]


async def test_a_session_read_back_equals_the_session_object(subject, user_id):
    session = await subject.service.create_session(
        app_name=subject.app_name, user_id=user_id, state={"key": "value"}
    )
    assert (
        await subject.service.get_session(
            app_name=subject.app_name, user_id=user_id, session_id=session.id
        )
        == session
    )

    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
    )
    await subject.service.append_event(session=session, event=event)

    assert (
        await subject.service.get_session(
            app_name=subject.app_name, user_id=user_id, session_id=session.id
        )
        == session
    )


async def test_bytes_in_an_event_come_back_as_bytes(subject, user_id):
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    content = types.Content(
        role="user",
        parts=[types.Part.from_bytes(data=b"\x89PNG test image", mime_type="image/png")],
    )
    grounding = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob")
    )
    await subject.service.append_event(
        session=session,
        event=Event(
            invocation_id="invocation",
            author="user",
            content=content,
            grounding_metadata=grounding,
        ),
    )

    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert stored.events[0].content == content
    assert stored.events[0].grounding_metadata == grounding


async def test_list_sessions_without_a_user_lists_every_users_sessions(subject, user_id):
    other_user = unique("neighbour-")
    mine = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    theirs = await subject.service.create_session(app_name=subject.app_name, user_id=other_user)

    listed = await subject.service.list_sessions(app_name=subject.app_name)

    owners = {session.id: session.user_id for session in listed.sessions}
    assert owners[mine.id] == user_id
    assert owners[theirs.id] == other_user
    assert all(session.events == [] for session in listed.sessions)


async def test_two_end_users_may_choose_the_same_session_id(subject, user_id):
    """ADK keys a session by app, user and id: another user's choice of id takes nothing,
    and so does the server: each user has their own session and history under the id."""
    chosen = unique("shared-id-")
    other_user = unique("other-")
    mine = await subject.service.create_session(
        app_name=subject.app_name, user_id=user_id, session_id=chosen
    )
    theirs = await subject.service.create_session(
        app_name=subject.app_name, user_id=other_user, session_id=chosen
    )
    await subject.service.append_event(mine, text_event("mine"))
    await subject.service.append_event(theirs, text_event("theirs"))

    assert (mine.id, theirs.id) == (chosen, chosen)
    for owner, session, text in ((user_id, mine, "mine"), (other_user, theirs, "theirs")):
        stored = await subject.service.get_session(
            app_name=subject.app_name, user_id=owner, session_id=session.id
        )
        assert texts(stored) == [text]
