"""docs/clients.md's "Use it from your ADK agent" example runs as written."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

from conftest import REPO_ROOT
from google.adk.agents import LlmAgent
from tests.fake_gemini import Reply, final_chunk, text_chunk

from agent_memory_client import AgentMemoryClient
from agent_memory_client.adk import RemoteMemoryService, RemoteSessionService


def docs_example() -> str:
    page = (REPO_ROOT / "docs" / "clients.md").read_text()
    start = page.index("\n## Use it from your ADK agent\n")
    end = page.index("\n## ", start + 1)
    return re.search(r"```python\n(.*?)```", page[start:end], re.DOTALL).group(1)


def test_the_example_talks_to_the_server_and_keeps_the_conversation(server, fake_gemini, tmp_path):
    key = server.key("support")
    script = tmp_path / "example.py"
    script.write_text(docs_example())
    fake_gemini.push(Reply([text_chunk("Teal is a lovely colour."), final_chunk()]))

    completed = subprocess.run(
        [sys.executable, str(script)],
        env={
            **os.environ,
            "AGENT_MEMORY_URL": server.base_url,
            "AGENT_MEMORY_KEY": key,
            "GOOGLE_API_KEY": "fake-key-for-the-fake-gemini-server",
            "GOOGLE_GEMINI_BASE_URL": fake_gemini.url,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "Teal is a lovely colour."
    stored = asyncio.run(_stored_session(server.base_url, key))
    assert [event["author"] for event in stored["events"]] == ["user", "helper"]
    assert stored["events"][0]["content"]["parts"][0]["text"] == "My favourite colour is teal."


async def _stored_session(base_url: str, key: str) -> dict:
    async with AgentMemoryClient(base_url=base_url, api_key=key) as client:
        return await client.get_session(
            app_name="support", user_id="customer-42", session_id="first-chat"
        )


def test_the_artifact_example_runs_with_its_own_imports_after_the_first(server):
    """docs/clients.md's "Files an agent saves" snippet imports what it uses: it runs with
    only the names the first example defines (and the reader's draw_chart) around it."""
    page = (REPO_ROOT / "docs" / "clients.md").read_text()
    start = page.index("\n## Files an agent saves\n")
    snippet = re.search(r"```python\n(.*?)```", page[start:], re.DOTALL).group(1)
    sessions = RemoteSessionService(base_url=server.base_url, api_key=server.key("support"))
    given = {
        "sessions": sessions,
        "memory": RemoteMemoryService(client=sessions.client),
        "agent": LlmAgent(name="helper", model="gemini-2.5-flash"),
        "draw_chart": lambda: b"\x89PNG\r\n\x1a\n",
    }
    namespace = dict(given)

    exec(compile(snippet, "docs/clients.md", "exec"), namespace)

    assert namespace["runner"].artifact_service is namespace["artifacts"]
    assert callable(namespace["keep_chart"])
