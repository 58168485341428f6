"""ADK's real Runner on the server: an LlmAgent (Gemini, through the fake Gemini server) whose
session service is RemoteSessionService and memory service RemoteMemoryService.

What an ADK developer would check: a fact told in one session is turned into a memory in the
background and reaches the model in a new session (preload_memory and load_memory); tools
write state in every scope and the next turn sees it; a rewind takes a turn back; deleting a
session, and deleting the end user after exporting their data, leave nothing behind.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.adk.tools import ToolContext, load_memory, preload_memory
from google.genai import types
from tests.fake_gemini import Reply, final_chunk, function_call_chunk, text_chunk

from agent_memory_client import AgentMemoryClient, NotFoundError
from agent_memory_client.adk import RemoteMemoryService, RemoteSessionService

APP = "adk-runner"
MEMORY_TIMEOUT_SECONDS = 90


def set_plan(plan: str, tool_context: ToolContext) -> dict:
    """Put the customer on a plan."""
    tool_context.state["plan"] = plan
    return {"ok": True, "plan": plan}


def remember_name(name: str, tool_context: ToolContext) -> dict:
    """Remember what the customer is called."""
    tool_context.state["user:name"] = name
    tool_context.state["app:names_learned"] = tool_context.state.get("app:names_learned", 0) + 1
    tool_context.state["temp:last_tool"] = "remember_name"
    return {"ok": True}


class Harness:
    """The runner, its services, the fake model, and the end user it talks for."""

    def __init__(self, *, fake_gemini, sessions, memory, client, user_id) -> None:
        self.fake = fake_gemini
        self.sessions = sessions
        self.memory = memory
        self.client = client
        self.user_id = user_id
        agent = LlmAgent(
            name="assistant",
            model=Gemini(model="gemini-2.5-flash", base_url=fake_gemini.url),
            instruction="You help {user:name?} with their {topic?} questions.",
            tools=[preload_memory, load_memory, set_plan, remember_name],
            output_key="last_reply",
        )
        self.runner = Runner(
            agent=agent, app_name=APP, session_service=sessions, memory_service=memory
        )

    async def new_session(self, **state) -> str:
        session = await self.sessions.create_session(
            app_name=APP, user_id=self.user_id, state=state
        )
        return session.id

    async def turn(self, session_id: str, text: str, *replies: Reply) -> list[Event]:
        """One turn: the user's ``text``, the model answering with ``replies`` in order."""
        self.fake.push(*replies)
        self.first_request = len(self.fake.requests)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        events = [
            event
            async for event in self.runner.run_async(
                user_id=self.user_id, session_id=session_id, new_message=message
            )
        ]
        assert self.fake.pending() == 0, "the model was asked fewer times than scripted"
        return events

    def requests_of_last_turn(self) -> list[str]:
        """The bodies the model received during the last turn, as JSON text."""
        return [json.dumps(request.body) for request in self.fake.requests[self.first_request :]]

    async def session(self, session_id: str):
        return await self.sessions.get_session(
            app_name=APP, user_id=self.user_id, session_id=session_id
        )

    async def memories_holding(self, text: str, *, query: str) -> list[MemoryEntry]:
        """The end user's memories that hold ``text``, once background generation made them."""
        deadline = time.monotonic() + MEMORY_TIMEOUT_SECONDS
        while True:
            found = (
                await self.memory.search_memory(app_name=APP, user_id=self.user_id, query=query)
            ).memories
            holding = [entry for entry in found if text in entry.content.parts[0].text]
            if holding:
                return holding
            if time.monotonic() > deadline:
                raise AssertionError(f"no memory holding {text!r} after waiting; found {found}")
            await asyncio.sleep(0.5)


def reply(text: str) -> Reply:
    return Reply([text_chunk(text), final_chunk()])


def tool_call(function: str, **args) -> Reply:
    return Reply([function_call_chunk(function, args), final_chunk()])


def final_text(events: list[Event]) -> str:
    finals = [event for event in events if event.is_final_response() and event.content]
    return "".join(part.text or "" for part in finals[-1].content.parts)


@pytest.fixture
async def harness(server, fake_gemini, monkeypatch, server_logs_on_failure) -> AsyncIterator:
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-the-fake-gemini-server")
    key = server.key(APP)
    sessions = RemoteSessionService(base_url=server.base_url, api_key=key)
    memory = RemoteMemoryService(client=sessions.client)
    yield Harness(
        fake_gemini=fake_gemini,
        sessions=sessions,
        memory=memory,
        client=sessions.client,
        user_id=f"customer-{uuid.uuid4().hex[:10]}",
    )
    await sessions.close()


async def test_a_fact_told_in_one_session_reaches_the_model_in_the_next(harness):
    colour = f"teal{uuid.uuid4().hex[:6]}"
    first = await harness.new_session(topic="colours")
    events = await harness.turn(first, f"My favourite colour is {colour}.", reply("Noted!"))
    assert final_text(events) == "Noted!"

    await harness.memory.add_session_to_memory(await harness.session(first))
    memories = await harness.memories_holding(colour, query="favourite colour")
    assert memories[0].custom_metadata["sources"][0]["session_id"] == first

    second = await harness.new_session()
    events = await harness.turn(
        second,
        "What is my favourite colour?",
        tool_call("load_memory", query="favourite colour"),
        reply(f"It is {colour}."),
    )

    preloaded, after_tool = harness.requests_of_last_turn()
    assert "PAST_CONVERSATIONS" in preloaded
    assert colour in preloaded
    answer = json.loads(after_tool)["contents"]
    tool_answers = [
        part["functionResponse"]
        for content in answer
        for part in content["parts"]
        if "functionResponse" in part
    ]
    assert tool_answers[0]["name"] == "load_memory"
    assert colour in json.dumps(tool_answers[0]["response"])
    assert final_text(events) == f"It is {colour}."


async def test_tools_write_state_in_every_scope_and_the_next_turn_sees_it(harness):
    session_id = await harness.new_session(topic="billing")
    events = await harness.turn(
        session_id,
        "Call me Ada and put me on the pro plan.",
        tool_call("remember_name", name="Ada"),
        tool_call("set_plan", plan="pro"),
        reply("Done, Ada."),
    )
    assert final_text(events) == "Done, Ada."
    assert "You help Ada with their billing questions." in harness.requests_of_last_turn()[-1]

    stored = await harness.session(session_id)
    assert stored.state["user:name"] == "Ada"
    assert stored.state["plan"] == "pro"
    assert stored.state["topic"] == "billing"
    assert stored.state["last_reply"] == "Done, Ada."
    assert stored.state["app:names_learned"] >= 1
    assert not any(key.startswith("temp:") for key in stored.state)

    later = await harness.new_session()
    later_session = await harness.session(later)
    assert later_session.state["user:name"] == "Ada"
    assert "plan" not in later_session.state
    assert await harness.sessions.get_user_state(app_name=APP, user_id=harness.user_id) == {
        "name": "Ada"
    }
    stranger = await harness.sessions.create_session(
        app_name=APP, user_id=f"stranger-{uuid.uuid4().hex[:10]}"
    )
    assert "user:name" not in stranger.state
    assert stranger.state["app:names_learned"] >= 1


async def test_the_stored_history_is_the_turns_events(harness):
    session_id = await harness.new_session()
    events = await harness.turn(
        session_id, "Upgrade me.", tool_call("set_plan", plan="pro"), reply("Upgraded.")
    )

    stored = await harness.session(session_id)

    assert [event.author for event in stored.events] == ["user"] + [e.author for e in events]
    assert stored.events[0].content.parts[0].text == "Upgrade me."
    assert [event.model_dump(mode="json") for event in stored.events[1:]] == [
        event.model_dump(mode="json") for event in events
    ]


async def test_a_rewind_takes_the_turn_back(harness):
    session_id = await harness.new_session()
    await harness.turn(
        session_id, "Put me on basic.", tool_call("set_plan", plan="basic"), reply("Basic it is.")
    )
    regretted = await harness.turn(
        session_id, "Switch me to gold.", tool_call("set_plan", plan="gold"), reply("Gold.")
    )
    assert (await harness.session(session_id)).state["plan"] == "gold"

    await harness.runner.rewind_async(
        user_id=harness.user_id,
        session_id=session_id,
        rewind_before_invocation_id=regretted[0].invocation_id,
    )

    assert (await harness.session(session_id)).state["plan"] == "basic"
    await harness.turn(session_id, "Which plan am I on?", reply("Basic."))
    (request,) = harness.requests_of_last_turn()
    assert "Put me on basic." in request
    assert "Switch me to gold." not in request
    assert "Gold." not in request


async def test_deleting_a_session_forgets_what_only_it_said(harness):
    pet = f"Rex{uuid.uuid4().hex[:6]}"
    session_id = await harness.new_session()
    await harness.turn(session_id, f"My dog is called {pet}.", reply("Cute!"))
    await harness.memory.add_session_to_memory(await harness.session(session_id))
    await harness.memories_holding(pet, query="dog")

    await harness.sessions.delete_session(
        app_name=APP, user_id=harness.user_id, session_id=session_id
    )

    assert await harness.session(session_id) is None
    found = await harness.memory.search_memory(app_name=APP, user_id=harness.user_id, query="dog")
    assert not [entry for entry in found.memories if pet in entry.content.parts[0].text]


async def test_export_then_delete_the_end_user_leaves_nothing(harness, server):
    city = f"Lisbon{uuid.uuid4().hex[:6]}"
    session_id = await harness.new_session(topic="travel")
    await harness.turn(session_id, f"My home town is {city}.", reply("Lovely."))
    await harness.memory.add_session_to_memory(await harness.session(session_id))
    await harness.memories_holding(city, query="home town")
    client: AgentMemoryClient = harness.client

    exported = await client.export_user(app_name=APP, user_id=harness.user_id)
    assert city in json.dumps(exported)

    await client.delete_user(app_name=APP, user_id=harness.user_id)

    assert server.rows_holding(city) == {}
    assert server.rows_holding(harness.user_id) == {}
    assert await harness.session(session_id) is None
    listed = await harness.sessions.list_sessions(app_name=APP, user_id=harness.user_id)
    assert listed.sessions == []
    found = await harness.memory.search_memory(
        app_name=APP, user_id=harness.user_id, query="home town"
    )
    assert found.memories == []
    try:
        after = await client.export_user(app_name=APP, user_id=harness.user_id)
    except NotFoundError:
        after = None
    assert city not in json.dumps(after)
