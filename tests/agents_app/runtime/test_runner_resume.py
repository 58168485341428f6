"""Running a stored turn on (``Runner.continue_async``): after its process died, or to retry
it; its events named by their place in the turn, which fences two runners of one turn."""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from google.genai import types

from agents_app.runtime.turn_store import TurnTakenOverError
from agents_app.runtime.turns import (
    CANCEL_SHUTDOWN,
    CANCEL_TAKEN_OVER,
    SERVER_STOPPED,
    TOOL_CALL_INTERRUPTED,
    TurnProgress,
)
from sessions_app import selectors, services
from sessions_app.events import Event, new_invocation_id
from sessions_app.models import EventRecord
from tests.agents_app.runtime.test_runner import (
    RecordingModel,
    StaticMemory,
    make_runner,
    new_session,
    stored,
    turn,
)
from tests.factories import UserFactory, session_key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner(transactional_db):
    return UserFactory()


async def _append(session, event):
    return await sync_to_async(services.event_append)(session=session, event=event)


async def _user_message_only(session, client_message_id="m1", text="hello again"):
    """A turn whose process died right after storing the user's message."""
    event = Event(
        id=f"msg-{client_message_id}",
        invocation_id=new_invocation_id(),
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        custom_metadata={"client_message_id": client_message_id},
    )
    await _append(session, event)
    return event


async def _progress(session, user_event_id="msg-m1"):
    stored_events = await sync_to_async(selectors.stored_events_of_turn)(
        session_key=await sync_to_async(session_key)(session), user_event_id=user_event_id
    )
    return TurnProgress.of([item.event for item in stored_events])


async def _continue(runner, user, session_id, progress):
    return [
        event
        async for event in runner.continue_async(
            user_id=str(user.pk), session_id=session_id, progress=progress
        )
    ]


async def _records(session_id):
    return await sync_to_async(list)(
        EventRecord.objects.filter(session__session_id=session_id).order_by("sequence")
    )


async def test_a_client_messages_turn_names_its_events_by_their_place(owner):
    session = await new_session(owner)
    await turn(make_runner(), owner, session.id, "my name is Ada", client_message_id="name")

    records = await _records(session.id)
    assert [record.event_id for record in records] == [
        "msg-name",
        "msg-name.1",
        "msg-name.2",
        "msg-name.3",
    ]
    assert len({record.invocation_id for record in records}) == 1


async def test_a_turn_whose_process_died_after_the_message_is_answered_once(owner):
    session = await new_session(owner)
    user_event = await _user_message_only(session)
    memory = StaticMemory(use=True, create=True)
    runner = make_runner(memory=memory)

    events = await _continue(runner, owner, session.id, await _progress(session))

    final = events[-1]
    assert final.id == "msg-m1.1" and final.turn_complete
    assert final.invocation_id == user_event.invocation_id
    assert final.text().startswith("You said: \u201chello again\u201d.")
    assert memory.completed == [user_event.invocation_id]
    assert [record.event_id for record in await _records(session.id)] == ["msg-m1", "msg-m1.1"]


async def test_a_half_run_tool_call_is_not_run_again_and_the_history_says_so(owner):
    session = await new_session(owner)
    user_event = await _user_message_only(session, text="my name is Ada")
    call = types.FunctionCall(
        id="call-1", name="set_state", args={"key": "user:name", "value": "Ada"}
    )
    await _append(
        session,
        Event(
            id="msg-m1.1",
            invocation_id=user_event.invocation_id,
            author="assistant",
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        ),
    )
    model = RecordingModel()

    events = await _continue(make_runner(model), owner, session.id, await _progress(session))

    response = events[0]
    assert response.id == "msg-m1.2"
    [answer] = response.get_function_responses()
    assert (answer.id, answer.name) == ("call-1", "set_state")
    assert answer.response == {"status": "error", "message": TOOL_CALL_INTERRUPTED}
    assert (await stored(owner, session.id)).state == {}, "the tool did not run again"
    assert events[-1].id == "msg-m1.3" and events[-1].turn_complete
    sent = model.requests[0].contents
    assert sent[-1].parts[0].function_response.response["message"] == TOOL_CALL_INTERRUPTED


async def test_retry_reads_the_turn_without_its_interrupted_ending(owner):
    session = await new_session(owner)
    user_event = await _user_message_only(session)
    await _append(
        session,
        Event(
            id="msg-m1.1",
            invocation_id=user_event.invocation_id,
            author="assistant",
            content=types.Content(role="model", parts=[types.Part(text="You said")]),
            turn_complete=True,
            interrupted=True,
        ),
    )
    model = RecordingModel()
    memory = StaticMemory(use=True, create=True)

    events = await _continue(
        make_runner(model, memory=memory), owner, session.id, await _progress(session)
    )

    assert [content.role for content in model.requests[0].contents] == ["user"]
    assert events[-1].id == "msg-m1.2"
    assert events[-1].text().startswith("You said: \u201chello again\u201d.")
    assert memory.completed == [user_event.invocation_id], "an interruption told memory nothing"
    history = (await stored(owner, session.id)).events
    assert [(event.id, bool(event.interrupted)) for event in history] == [
        ("msg-m1", False),
        ("msg-m1.1", True),
        ("msg-m1.2", False),
    ]


async def test_retrying_a_failed_turn_does_not_tell_memory_twice(owner):
    session = await new_session(owner)
    user_event = await _user_message_only(session)
    await _append(
        session,
        Event(
            id="msg-m1.1",
            invocation_id=user_event.invocation_id,
            author="assistant",
            turn_complete=True,
            error_code="model_unavailable",
            error_message="overloaded",
        ),
    )
    memory = StaticMemory(use=True, create=True)

    events = await _continue(
        make_runner(memory=memory), owner, session.id, await _progress(session)
    )

    assert events[-1].id == "msg-m1.2" and not events[-1].error_code
    assert memory.completed == []


async def test_of_two_runners_of_one_turn_only_one_stores_its_end(owner):
    session = await new_session(owner)
    await _user_message_only(session, text=" ".join(["word"] * 30))
    progress = await _progress(session)
    slow = make_runner(RecordingModel(chunk_delay=0.02))
    quick = make_runner(RecordingModel())

    slow_run = asyncio.create_task(_continue(slow, owner, session.id, progress))
    await asyncio.sleep(0.05)
    await _continue(quick, owner, session.id, progress)
    with pytest.raises(TurnTakenOverError):
        await slow_run

    records = await _records(session.id)
    assert [record.event_id for record in records] == ["msg-m1", "msg-m1.1"]
    assert [record.turn_complete for record in records] == [None, True]


async def _cancel_midway(runner, user, session, reason):
    seen = []

    async def consume():
        async for event in runner.run_async(
            user_id=str(user.pk),
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text="word " * 40)]),
            client_message_id="long",
        ):
            seen.append(event)

    task = asyncio.create_task(consume())
    while sum(1 for event in seen if event.partial) < 2:
        await asyncio.sleep(0.01)
    task.cancel(reason)
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_turn_cut_short_by_a_shutdown_is_stored_as_stopped_by_the_server(owner):
    session = await new_session(owner)
    await _cancel_midway(
        make_runner(RecordingModel(chunk_delay=0.05)), owner, session, CANCEL_SHUTDOWN
    )

    final = (await stored(owner, session.id)).events[-1]
    assert (final.id, final.interrupted, final.error_code) == ("msg-long.1", True, SERVER_STOPPED)
    assert final.text().startswith("You said")


async def test_a_turn_taken_over_stores_nothing_more(owner):
    session = await new_session(owner)
    await _cancel_midway(
        make_runner(RecordingModel(chunk_delay=0.05)), owner, session, CANCEL_TAKEN_OVER
    )

    assert [record.event_id for record in await _records(session.id)] == ["msg-long"]
