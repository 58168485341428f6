"""Rewinds with ADK's real Runner: the same script against ADK's own session services
(in memory, and the database service on SQLite) and against RemoteSessionService, compared.

What an ADK developer would check: after a rewind, ``get_session`` answers every stored event
(the rewound ones and the rewind's own) as ADK's services do, the model no longer sees the
rewound turns, and rewinding to a turn an earlier rewind took out brings back the state ADK
brings back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from google.adk.tools import ToolContext
from google.genai import types
from tests.fake_gemini import Reply, final_chunk, function_call_chunk, text_chunk

from agent_memory_client.adk import RemoteSessionService

APP = "adk-rewind"
STEPS = (1, 2, 3)


def record_step(step: int, tool_context: ToolContext) -> dict:
    """Record the step the conversation reached."""
    tool_context.state["step"] = step
    tool_context.state[f"reached_{step}"] = True
    tool_context.state["user:steps_seen"] = step
    return {"ok": True}


class Script:
    """ADK's Runner over one session service, talking to the scripted model."""

    def __init__(self, *, service, fake_gemini) -> None:
        self.service = service
        self.fake = fake_gemini
        self.user_id = f"rewinder-{uuid.uuid4().hex[:10]}"
        agent = LlmAgent(
            name="assistant",
            model=Gemini(model="gemini-2.5-flash", base_url=fake_gemini.url),
            instruction="You keep count of the steps.",
            tools=[record_step],
            output_key="last_reply",
        )
        self.runner = Runner(agent=agent, app_name=APP, session_service=service)

    async def three_turns(self) -> tuple[str, list[str]]:
        """A new session with three turns, each a tool call and a reply: its id and the
        turns' invocation ids."""
        session = await self.service.create_session(app_name=APP, user_id=self.user_id)
        invocations = [await self.turn(session.id, step) for step in STEPS]
        return session.id, invocations

    async def turn(self, session_id: str, step: int) -> str:
        """The user's message for ``step``; the model records the step, then replies."""
        self.fake.push(
            Reply([function_call_chunk("record_step", {"step": step}), final_chunk()]),
            Reply([text_chunk(f"Reached step {step}."), final_chunk()]),
        )
        self.first_request = len(self.fake.requests)
        message = types.Content(role="user", parts=[types.Part(text=f"Go to step {step}.")])
        events = [
            event
            async for event in self.runner.run_async(
                user_id=self.user_id, session_id=session_id, new_message=message
            )
        ]
        assert self.fake.pending() == 0, "the model was asked fewer times than scripted"
        return events[0].invocation_id

    async def rewind(self, session_id: str, invocation_id: str) -> None:
        await self.runner.rewind_async(
            user_id=self.user_id, session_id=session_id, rewind_before_invocation_id=invocation_id
        )

    async def seen(self, session_id: str) -> dict[str, Any]:
        """What a developer compares: the events get_session answers (who wrote them, what
        they say, which rewind they are) and the state, a key a rewind took away being
        absent (the server deletes it where ADK's services keep it as None)."""
        session = await self.service.get_session(
            app_name=APP, user_id=self.user_id, session_id=session_id
        )
        return {
            "events": [_event_seen(event) for event in session.events],
            "state": {key: value for key, value in session.state.items() if value is not None},
        }

    def texts_the_model_saw(self) -> list[str]:
        """The texts of the contents of the model's first request in the last turn."""
        contents = self.fake.requests[self.first_request].body["contents"]
        return [part["text"] for content in contents for part in content["parts"] if "text" in part]


def _event_seen(event) -> tuple:
    text = "".join(part.text or "" for part in event.content.parts) if event.content else ""
    calls = [call.name for call in event.get_function_calls()]
    rewind = event.actions.rewind_before_invocation_id
    return (event.author, text, json.dumps(calls), rewind is not None)


@pytest.fixture(params=["in_memory", "database", "remote"])
async def script(request, fake_gemini, monkeypatch, tmp_path) -> AsyncIterator[Script]:
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-the-fake-gemini-server")
    if request.param == "in_memory":
        yield Script(service=InMemorySessionService(), fake_gemini=fake_gemini)
    elif request.param == "database":
        service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
        yield Script(service=service, fake_gemini=fake_gemini)
        await service.close()
    else:
        server = request.getfixturevalue("server")
        request.getfixturevalue("server_logs_on_failure")
        service = RemoteSessionService(base_url=server.base_url, api_key=server.key(APP))
        yield Script(service=service, fake_gemini=fake_gemini)
        await service.close()


@pytest.fixture
async def adk_script(fake_gemini, monkeypatch) -> Script:
    """The same script on ADK's in-memory service: the reference every service must match."""
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-the-fake-gemini-server")
    return Script(service=InMemorySessionService(), fake_gemini=fake_gemini)


async def rewind_before_the_second_turn(script: Script) -> dict[str, Any]:
    session_id, invocations = await script.three_turns()
    await script.rewind(session_id, invocations[1])
    seen = await script.seen(session_id)
    await script.turn(session_id, 4)
    seen["model_saw"] = script.texts_the_model_saw()
    seen["after_next_turn"] = await script.seen(session_id)
    return seen


async def rewind_before_three_then_two_then_three(script: Script) -> dict[str, Any]:
    session_id, invocations = await script.three_turns()
    seen = {}
    for step, invocation in (
        ("3", invocations[2]),
        ("2", invocations[1]),
        ("3 again", invocations[2]),
    ):
        await script.rewind(session_id, invocation)
        seen[step] = await script.seen(session_id)
    await script.turn(session_id, 4)
    seen["model_saw"] = script.texts_the_model_saw()
    return seen


async def test_get_session_after_a_rewind_answers_what_adks_services_answer(script, adk_script):
    expected = await rewind_before_the_second_turn(adk_script)

    seen = await rewind_before_the_second_turn(script)

    assert len(seen["events"]) == len(expected["events"]) == 13
    assert seen == expected
    assert seen["state"] == {
        "step": 1,
        "reached_1": True,
        "user:steps_seen": 3,
        "last_reply": ("Reached step 1."),
    }
    assert "Go to step 1." in seen["model_saw"]
    assert not {"Go to step 2.", "Reached step 2.", "Go to step 3."} & set(seen["model_saw"])


async def test_rewinding_back_and_forth_restores_the_state_adk_restores(script, adk_script):
    expected = await rewind_before_three_then_two_then_three(adk_script)

    seen = await rewind_before_three_then_two_then_three(script)

    assert seen == expected
    assert seen["3 again"]["state"] == {
        "step": 2,
        "reached_1": True,
        "reached_2": True,
        "user:steps_seen": 3,
        "last_reply": "Reached step 2.",
    }
    assert seen["model_saw"][:4] == [
        "Go to step 1.",
        "Reached step 1.",
        "Go to step 2.",
        "Reached step 2.",
    ]
    assert "Go to step 3." not in seen["model_saw"]
