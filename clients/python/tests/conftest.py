"""Fixtures of the client's suite: a real server, API keys, and the services under test.

The suite runs in google-adk's environment (``make test-adk`` builds it), where
the server's own code cannot be imported: the server runs in the project's
environment, started as ``$PRODUCT_PYTHON -m tests.multiprocess.serve`` (its
own PostgreSQL and Redis, daphne and a Celery worker), and this process talks
to it over HTTP like any client. The model is Gemini through the project's fake
Gemini server (``tests/fake_gemini.py``, stdlib only), which ADK's google-genai
client reaches by base URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.adk.sessions import DatabaseSessionService, InMemorySessionService

from agent_memory_client import AgentMemoryClient
from agent_memory_client.adk import RemoteMemoryService, RemoteSessionService

REPO_ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO_ROOT))

from tests.fake_gemini import FakeGemini  # noqa: E402

SEMANTICS_APP = "adk-semantics"


class Server:
    """The server process and the commands it takes (see tests/multiprocess/serve.py)."""

    def __init__(self, python: str) -> None:
        self.process = subprocess.Popen(
            [python, "-m", "tests.multiprocess.serve"],
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url = self._first_reply_with("base_url")["base_url"]
        self._keys: dict[tuple[str, tuple[str, ...]], str] = {}

    def _first_reply_with(self, key: str) -> dict[str, Any]:
        """The next JSON object on the server's stdout with ``key`` (other output skipped)."""
        while line := self.process.stdout.readline():
            if line.startswith("{"):
                reply = json.loads(line)
                if key in reply or "error" in reply:
                    if "error" in reply:
                        raise RuntimeError(f"the server failed: {reply['error']}")
                    return reply
        raise RuntimeError(f"the server exited with code {self.process.wait()} (see above)")

    def command(self, op: str, **args: Any) -> Any:
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()
        return self._first_reply_with("result")["result"]

    def key(self, app: str, scopes: tuple[str, ...] = ()) -> str:
        """An API key of ``app`` (created with the app on first use), every scope unless
        ``scopes`` narrows them; the same key for the same arguments."""
        wanted = (app, tuple(scopes))
        if wanted not in self._keys:
            self._keys[wanted] = self.command(
                "app_key_create", app=app, scopes=list(scopes) or None
            )
        return self._keys[wanted]

    def rows_holding(self, text: str) -> dict[str, int]:
        return self.command("rows_holding", text=text)

    def logs(self) -> str:
        return self.command("logs")

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    python = os.environ.get("PRODUCT_PYTHON")
    if not python:
        raise RuntimeError(
            "PRODUCT_PYTHON must name the project's interpreter (.venv/bin/python): "
            "`make test-adk` sets it"
        )
    running = Server(python)
    yield running
    running.stop()


@pytest.fixture
def server_logs_on_failure(server: Server, request) -> Iterator[None]:
    """Print the server's logs after the test (pytest shows them when it fails)."""
    yield
    print(server.logs())


@pytest.fixture(scope="session")
def fake_gemini() -> Iterator[FakeGemini]:
    fake = FakeGemini().start()
    yield fake
    fake.stop()


@dataclass
class Subject:
    """A session service under test and the app its sessions are made in."""

    name: str
    service: Any
    app_name: str


@pytest.fixture(params=["in_memory", "database", "remote"])
async def subject(request, tmp_path) -> AsyncIterator[Subject]:
    """Each of ADK's own session services, then the remote one: the same tests pass on
    all three, so what they check is ADK's behaviour, and the remote service has it."""
    if request.param == "in_memory":
        yield Subject("in_memory", InMemorySessionService(), SEMANTICS_APP)
    elif request.param == "database":
        service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
        yield Subject("database", service, SEMANTICS_APP)
        await service.close()
    else:
        server = request.getfixturevalue("server")
        service = RemoteSessionService(base_url=server.base_url, api_key=server.key(SEMANTICS_APP))
        yield Subject("remote", service, SEMANTICS_APP)
        await service.close()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[AgentMemoryClient]:
    async with AgentMemoryClient(
        base_url=server.base_url, api_key=server.key(SEMANTICS_APP)
    ) as opened:
        yield opened


@pytest.fixture
async def memory_service(server: Server) -> AsyncIterator[RemoteMemoryService]:
    service = RemoteMemoryService(base_url=server.base_url, api_key=server.key(SEMANTICS_APP))
    yield service
    await service.close()


@pytest.fixture
def user_id() -> str:
    """A new end user for each test: the tests share the app, never a user."""
    return f"user-{uuid.uuid4().hex[:12]}"
