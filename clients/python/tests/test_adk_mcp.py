"""An ADK agent that uses a person's memory through MCP: ADK's own ``McpToolset`` over
Streamable HTTP to the server's ``/mcp/``, with the person's personal access token.

The model (the fake Gemini server) is scripted to call the server's MCP tools; what is
checked is what the person and the agent would see: the memory the agent added is on the
person's Memory page, a later conversation finds it, another person's token does not.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from google.adk.agents import LlmAgent
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.mcp_tool import McpToolset
from google.adk.tools.mcp_tool.mcp_session_manager import StreamableHTTPConnectionParams
from google.genai import types
from tests.fake_gemini import Reply, final_chunk, function_call_chunk, text_chunk

APP = "mcp-assistant"


def tool_call(function: str, **args) -> Reply:
    return Reply([function_call_chunk(function, args), final_chunk()])


def reply(text: str) -> Reply:
    return Reply([text_chunk(text), final_chunk()])


class Assistant:
    """An ADK agent whose only tools are the memory server's, reached with ``token``."""

    def __init__(self, *, server, fake_gemini, token: str) -> None:
        self.fake = fake_gemini
        self.toolset = McpToolset(
            connection_params=StreamableHTTPConnectionParams(
                url=f"{server.base_url}/mcp/",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            ),
            tool_filter=["search_memories", "add_memory"],
        )
        self.model = Gemini(model="gemini-2.5-flash", base_url=fake_gemini.url)
        agent = LlmAgent(
            name="assistant",
            model=self.model,
            instruction="You remember what the person asks you to.",
            tools=[self.toolset],
        )
        self.sessions = InMemorySessionService()
        self.runner = Runner(agent=agent, app_name=APP, session_service=self.sessions)

    async def conversation(self, text: str, *replies: Reply) -> dict[str, list[dict]]:
        """A new conversation of one turn; the answers of the tools the model called."""
        session = await self.sessions.create_session(app_name=APP, user_id="me")
        self.fake.push(*replies)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        answers: dict[str, list[dict]] = {}
        async for event in self.runner.run_async(
            user_id="me", session_id=session.id, new_message=message
        ):
            for response in event.get_function_responses():
                answers.setdefault(response.name, []).append(response.response)
        assert self.fake.pending() == 0, "the model was asked fewer times than scripted"
        return answers


@pytest.fixture
async def assistants(server, fake_gemini, monkeypatch, server_logs_on_failure) -> AsyncIterator:
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-the-fake-gemini-server")
    made: list[Assistant] = []

    def make(token: str) -> Assistant:
        made.append(Assistant(server=server, fake_gemini=fake_gemini, token=token))
        return made[-1]

    yield make
    for assistant in made:
        await assistant.toolset.close()
        await assistant.model.api_client.aio.aclose()


async def test_an_adk_agent_keeps_and_finds_a_persons_memory_over_mcp(
    server, fake_gemini, assistants
):
    person = server.command("person_create")
    tea = f"Prefers {uuid.uuid4().hex[:8]} tea"
    assistant = assistants(person["token"])

    answers = await assistant.conversation(
        "Remember that I like this tea.",
        tool_call("add_memory", text=tea, topic="food"),
        reply("I will remember."),
    )

    (added,) = answers["add_memory"]
    assert tea in json.dumps(added)
    async with httpx.AsyncClient(
        base_url=server.base_url, cookies=person["cookies"], headers={"Accept": "application/json"}
    ) as browser:
        shown = await browser.get("/api/memories/")
    assert shown.status_code == 200
    assert tea in shown.text

    start = len(fake_gemini.requests)
    answers = await assistant.conversation(
        "Which tea do I like?",
        tool_call("search_memories", query=tea),
        reply("That one."),
    )
    (found,) = answers["search_memories"]
    assert tea in json.dumps(found)
    assert tea in json.dumps(fake_gemini.requests[start:][-1].body)

    stranger = assistants(server.command("person_create")["token"])
    answers = await stranger.conversation(
        "Which tea do I like?",
        tool_call("search_memories", query=tea),
        reply("I do not know."),
    )
    (found,) = answers["search_memories"]
    assert tea not in json.dumps(found)
