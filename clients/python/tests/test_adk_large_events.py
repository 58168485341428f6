"""Events of any size ADK accepts, on ADK's own session services and on RemoteSessionService.

A photo a person sends inline, a PDF, a tool returning a long document: ADK's services store
such events whole. The same tests run on InMemorySessionService, DatabaseSessionService
(SQLite) and RemoteSessionService (``subject``), then through ADK's real Runner, where a tool's
large result must leave the turn complete: the call answered, the answer the model sees.
"""

from __future__ import annotations

import os
import uuid

import pytest
from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.genai import types
from tests.fake_gemini import Reply, final_chunk, function_call_chunk, text_chunk

from agent_memory_client.adk import RemoteSessionService

APP = "adk-large-events"
PHOTO = os.urandom(2 * 1024 * 1024)
REPORT = {"title": "Quarterly report", "pages": [f"page {n}: " + "ü" * 2000 for n in range(150)]}


def photo_message(data: bytes = PHOTO) -> Event:
    return Event(
        invocation_id=f"e-{uuid.uuid4().hex[:8]}",
        author="user",
        content=types.Content(
            role="user",
            parts=[
                types.Part(text="What is in this photo?"),
                types.Part(inline_data=types.Blob(data=data, mime_type="image/jpeg")),
            ],
        ),
    )


def tool_exchange(result: dict) -> list[Event]:
    invocation = f"e-{uuid.uuid4().hex[:8]}"
    call = types.FunctionCall(id="call-1", name="fetch_report", args={"quarter": 3})
    answer = types.FunctionResponse(id="call-1", name="fetch_report", response=result)
    return [
        Event(
            invocation_id=invocation,
            author="analyst",
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        ),
        Event(
            invocation_id=invocation,
            author="analyst",
            content=types.Content(role="user", parts=[types.Part(function_response=answer)]),
        ),
    ]


async def test_a_large_inline_photo_and_tool_result_are_stored_and_read_back_whole(
    subject, user_id
):
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    sent = [photo_message(), *tool_exchange(REPORT)]
    for event in sent:
        await subject.service.append_event(session, event)

    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )

    assert len(stored.events) == 3
    assert stored.events[0].content.parts[1].inline_data.data == PHOTO
    assert stored.events[0].content.parts[1].inline_data.mime_type == "image/jpeg"
    assert stored.events[2].content.parts[0].function_response.response == REPORT
    assert [event.content for event in stored.events] == [event.content for event in sent]


async def test_a_pdf_of_several_megabytes_in_a_message_is_kept(subject, user_id):
    document = b"%PDF-1.7\n" + os.urandom(5 * 1024 * 1024) + b"\n%%EOF\n"
    session = await subject.service.create_session(app_name=subject.app_name, user_id=user_id)
    message = photo_message(document)
    message.content.parts[1].inline_data.mime_type = "application/pdf"

    await subject.service.append_event(session, message)

    stored = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session.id
    )
    assert stored.events[0].content.parts[1].inline_data.data == document


async def fetch_report(quarter: int) -> dict:
    """The quarter's report, every page."""
    return {**REPORT, "quarter": quarter}


async def export_everything() -> dict:
    """Every row there is: more than the server keeps in one event (MAX_EVENT_BYTES)."""
    return {"rows": ["x" * 1_000_000] * 34}


@pytest.fixture
async def runner(server, fake_gemini, monkeypatch, server_logs_on_failure):
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-the-fake-gemini-server")
    sessions = RemoteSessionService(base_url=server.base_url, api_key=server.key(APP))
    model = Gemini(model="gemini-2.5-flash", base_url=fake_gemini.url)
    agent = LlmAgent(
        name="analyst",
        model=model,
        instruction="You read reports.",
        tools=[fetch_report, export_everything],
    )
    yield Runner(agent=agent, app_name=APP, session_service=sessions), sessions
    await sessions.close()
    await model.api_client.aio.aclose()


async def test_a_turn_with_a_photo_and_a_large_tool_result_completes_through_the_runner(
    runner, fake_gemini
):
    adk_runner, sessions = runner
    user_id = f"analyst-{uuid.uuid4().hex[:10]}"
    session = await sessions.create_session(app_name=APP, user_id=user_id)
    fake_gemini.push(
        Reply([function_call_chunk("fetch_report", {"quarter": 3}), final_chunk()]),
        Reply([text_chunk("The report has 150 pages."), final_chunk()]),
    )
    message = photo_message().content

    events = [
        event
        async for event in adk_runner.run_async(
            user_id=user_id, session_id=session.id, new_message=message
        )
    ]

    assert fake_gemini.pending() == 0
    assert events[-1].content.parts[0].text == "The report has 150 pages."
    stored = await sessions.get_session(app_name=APP, user_id=user_id, session_id=session.id)
    assert stored.events[0].content.parts[1].inline_data.data == PHOTO
    calls = [event for event in stored.events if event.get_function_calls()]
    answers = [event for event in stored.events if event.get_function_responses()]
    assert len(calls) == len(answers) == 1
    assert answers[0].get_function_responses()[0].response == {**REPORT, "quarter": 3}
    assert answers[0].get_function_responses()[0].id == calls[0].get_function_calls()[0].id


async def test_a_tool_result_over_the_servers_limit_leaves_the_call_answered_with_why(
    runner, fake_gemini
):
    adk_runner, sessions = runner
    user_id = f"analyst-{uuid.uuid4().hex[:10]}"
    session = await sessions.create_session(app_name=APP, user_id=user_id)
    fake_gemini.push(
        Reply([function_call_chunk("export_everything", {}), final_chunk()]),
        Reply([text_chunk("The export was too large to keep."), final_chunk()]),
    )
    start = len(fake_gemini.requests)

    events = [
        event
        async for event in adk_runner.run_async(
            user_id=user_id,
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text="Export it all.")]),
        )
    ]

    assert events[-1].content.parts[0].text == "The export was too large to keep."
    stored = await sessions.get_session(app_name=APP, user_id=user_id, session_id=session.id)
    answers = [each for event in stored.events for each in event.get_function_responses()]
    assert len(answers) == 1
    assert "not kept" in answers[0].response["error"]
    assert "MAX_EVENT_BYTES" in answers[0].response["error"]
    asked_after = str(fake_gemini.requests[start + 1].body)
    assert "not kept" in asked_after and len(asked_after) < 100_000
