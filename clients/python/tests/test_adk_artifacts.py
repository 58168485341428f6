"""RemoteArtifactService against ADK's own InMemoryArtifactService, with ADK's real Runner,
and as the person whose files they are sees them.

The same script runs on both services, so what it checks is ADK's behaviour (versions from 0,
the newest loaded when none is asked, ``None`` for what is absent, ``user:`` files seen from
every session); then an agent's tool saves and loads files through the Runner; then the
files an agent saved are the ones the person's chat lists, in their export, and gone with
their data deletion.
"""

from __future__ import annotations

import base64
import io
import re
import uuid
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from google.adk.agents import LlmAgent
from google.adk.artifacts import InMemoryArtifactService, artifact_util
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.adk.tools import ToolContext
from google.genai import types
from tests.fake_gemini import Reply, final_chunk, function_call_chunk, text_chunk

from agent_memory_client import AppNotFoundError
from agent_memory_client.adk import RemoteArtifactService, RemoteSessionService

APP = "adk-artifacts"


def png(width: int = 2, height: int = 1) -> bytes:
    """A whole PNG image of ``width`` x ``height`` grey pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    out = io.BytesIO()
    out.write(b"\x89PNG\r\n\x1a\n")
    out.write(chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return out.getvalue()


def image_part(data: bytes) -> types.Part:
    return types.Part(inline_data=types.Blob(data=data, mime_type="image/png"))


@dataclass
class Subject:
    name: str
    service: Any
    user_id: str
    session_id: str
    other_session_id: str


@pytest.fixture(params=["in_memory", "remote"])
async def subject(request, server) -> AsyncIterator[Subject]:
    """ADK's in-memory artifact service, then the remote one, each with two sessions of a
    new end user (stored on the server for the remote one)."""
    user_id = f"user-{uuid.uuid4().hex[:12]}"
    if request.param == "in_memory":
        yield Subject("in_memory", InMemoryArtifactService(), user_id, "s1", "s2")
        return
    sessions = RemoteSessionService(base_url=server.base_url, api_key=server.key(APP))
    first = await sessions.create_session(app_name=APP, user_id=user_id)
    second = await sessions.create_session(app_name=APP, user_id=user_id)
    service = RemoteArtifactService(client=sessions.client)
    yield Subject("remote", service, user_id, first.id, second.id)
    await sessions.close()


async def test_versions_count_from_zero_and_load_by_number(subject):
    service, scope = subject.service, {"app_name": APP, "user_id": subject.user_id}
    first, second = png(1, 1), png(3, 2)

    saved = [
        await service.save_artifact(
            **scope, session_id=subject.session_id, filename="chart.png", artifact=image_part(each)
        )
        for each in (first, second)
    ]

    assert saved == [0, 1]
    here = {**scope, "session_id": subject.session_id, "filename": "chart.png"}
    assert await service.load_artifact(**here) == image_part(second)
    assert await service.load_artifact(**here, version=0) == image_part(first)
    assert await service.load_artifact(**here, version=1) == image_part(second)
    assert await service.load_artifact(**here, version=2) is None
    assert await service.load_artifact(**here, version=-1) is None
    assert await service.list_versions(**here) == [0, 1]
    described = await service.list_artifact_versions(**here)
    assert [(each.version, each.mime_type) for each in described] == [
        (0, "image/png"),
        (1, "image/png"),
    ]
    latest = await service.get_artifact_version(**here)
    assert (latest.version, latest.mime_type) == (1, "image/png")
    assert (await service.get_artifact_version(**here, version=0)).version == 0
    assert await service.get_artifact_version(**here, version=5) is None


async def test_text_parts_and_metadata_come_back_as_saved(subject):
    service, scope = subject.service, {"app_name": APP, "user_id": subject.user_id}
    here = {**scope, "session_id": subject.session_id, "filename": "notes.md"}

    version = await service.save_artifact(
        **here, artifact=types.Part(text="# Plan\nShip it."), custom_metadata={"by": "planner"}
    )

    assert version == 0
    assert await service.load_artifact(**here) == types.Part(text="# Plan\nShip it.")
    (described,) = await service.list_artifact_versions(**here)
    assert described.custom_metadata == {"by": "planner"}
    assert described.mime_type == "text/plain"
    assert await service.save_artifact(**here, artifact={"text": "Shipped."}) == 1
    assert await service.load_artifact(**here) == types.Part(text="Shipped.")


async def test_user_files_are_seen_from_every_session(subject):
    service, scope = subject.service, {"app_name": APP, "user_id": subject.user_id}
    await service.save_artifact(
        **scope, session_id=subject.session_id, filename="draft.txt", artifact={"text": "one"}
    )
    await service.save_artifact(
        **scope,
        session_id=subject.session_id,
        filename="user:avatar.png",
        artifact=image_part(png()),
    )

    assert await service.list_artifact_keys(**scope, session_id=subject.session_id) == [
        "draft.txt",
        "user:avatar.png",
    ]
    assert await service.list_artifact_keys(**scope, session_id=subject.other_session_id) == [
        "user:avatar.png"
    ]
    assert await service.list_artifact_keys(**scope) == ["user:avatar.png"]
    avatar = {**scope, "filename": "user:avatar.png"}
    assert await service.load_artifact(**avatar) == image_part(png())
    assert await service.load_artifact(**avatar, session_id=subject.other_session_id) == (
        image_part(png())
    )
    assert (
        await service.load_artifact(
            **scope, session_id=subject.other_session_id, filename="draft.txt"
        )
        is None
    )
    stranger = {"app_name": APP, "user_id": f"stranger-{uuid.uuid4().hex[:8]}"}
    assert await service.list_artifact_keys(**stranger) == []
    assert await service.load_artifact(**stranger, filename="user:avatar.png") is None


async def test_deleting_a_file_removes_every_version(subject):
    service, scope = subject.service, {"app_name": APP, "user_id": subject.user_id}
    here = {**scope, "session_id": subject.session_id, "filename": "report.txt"}
    for text in ("v0", "v1"):
        await service.save_artifact(**here, artifact={"text": text})

    await service.delete_artifact(**here)

    assert await service.load_artifact(**here) is None
    assert await service.list_versions(**here) == []
    assert await service.list_artifact_versions(**here) == []
    assert await service.get_artifact_version(**here) is None
    assert await service.list_artifact_keys(**scope, session_id=subject.session_id) == []
    await service.delete_artifact(**here)
    assert await service.save_artifact(**here, artifact={"text": "again"}) == 0


async def test_a_session_file_needs_a_session(subject):
    service, scope = subject.service, {"app_name": APP, "user_id": subject.user_id}
    with pytest.raises(InputValidationError, match="Session ID must be provided"):
        await service.save_artifact(**scope, filename="a.txt", artifact={"text": "x"})
    with pytest.raises(InputValidationError, match="Session ID must be provided"):
        await service.load_artifact(**scope, filename="a.txt")
    with pytest.raises(InputValidationError, match="Session ID must be provided"):
        await service.delete_artifact(**scope, filename="a.txt")


ANY_PART = {
    "data.json": types.Part(
        inline_data=types.Blob(data=b'{"rows": [1, 2]}', mime_type="application/json")
    ),
    "table.csv": types.Part(
        inline_data=types.Blob(data=b"a,b\n1,2\n", mime_type="text/csv; charset=utf-8")
    ),
    "voice.ogg": types.Part(inline_data=types.Blob(data=bytes(range(256)), mime_type="audio/ogg")),
    "blob.bin": types.Part(
        inline_data=types.Blob(data=b"\x00\xff" * 64, mime_type="application/octet-stream")
    ),
    "page.html": types.Part(
        inline_data=types.Blob(data=b"<script>x</script>", mime_type="text/html")
    ),
    "empty.txt": types.Part(text=""),
    "linked.pdf": types.Part(
        file_data=types.FileData(
            file_uri="gs://bucket/q3.pdf", mime_type="application/pdf", display_name="Q3"
        )
    ),
    "reports/2026/q1 résumé.md": types.Part(text="# Q1"),
}


async def test_any_part_is_kept_byte_for_byte_with_its_type(subject):
    service = subject.service
    scope = {"app_name": APP, "user_id": subject.user_id, "session_id": subject.session_id}
    for filename, part in ANY_PART.items():
        assert await service.save_artifact(**scope, filename=filename, artifact=part) == 0

    for filename, part in ANY_PART.items():
        assert await service.load_artifact(**scope, filename=filename) == part, filename
    assert await service.list_artifact_keys(**scope) == sorted(ANY_PART)
    described = {
        filename: (await service.get_artifact_version(**scope, filename=filename)).mime_type
        for filename in ANY_PART
    }
    assert described == {
        "data.json": "application/json",
        "table.csv": "text/csv; charset=utf-8",
        "voice.ogg": "audio/ogg",
        "blob.bin": "application/octet-stream",
        "page.html": "text/html",
        "empty.txt": "text/plain",
        "linked.pdf": "application/pdf",
        "reports/2026/q1 résumé.md": "text/plain",
    }
    await service.delete_artifact(**scope, filename="reports/2026/q1 résumé.md")
    assert await service.load_artifact(**scope, filename="reports/2026/q1 résumé.md") is None


async def test_an_artifact_reference_loads_what_it_names_within_its_scope(subject):
    service = subject.service
    scope = {"app_name": APP, "user_id": subject.user_id, "session_id": subject.session_id}
    await service.save_artifact(**scope, filename="chart.png", artifact=image_part(png(3, 3)))
    await service.save_artifact(**scope, filename="chart.png", artifact=image_part(png(5, 5)))
    first = artifact_util.get_artifact_uri(
        app_name=APP,
        user_id=subject.user_id,
        session_id=subject.session_id,
        filename="chart.png",
        version=0,
    )
    reference = types.Part(file_data=types.FileData(file_uri=first, mime_type="image/png"))

    assert await service.save_artifact(**scope, filename="pinned", artifact=reference) == 0

    assert await service.load_artifact(**scope, filename="pinned") == image_part(png(3, 3))
    elsewhere = artifact_util.get_artifact_uri(
        app_name=APP, user_id="someone-else", filename="user:x.png", version=0
    )
    with pytest.raises(InputValidationError, match="same app and user"):
        await service.save_artifact(
            **scope,
            filename="stolen",
            artifact=types.Part(file_data=types.FileData(file_uri=elsewhere)),
        )
    other_session = artifact_util.get_artifact_uri(
        app_name=APP,
        user_id=subject.user_id,
        session_id=subject.other_session_id,
        filename="chart.png",
        version=0,
    )
    with pytest.raises(InputValidationError, match="same session scope"):
        await service.save_artifact(
            **scope,
            filename="crossed",
            artifact=types.Part(file_data=types.FileData(file_uri=other_session)),
        )
    assert await service.list_artifact_keys(**scope) == ["chart.png", "pinned"]


# --- What only the server checks ---------------------------------------------------------------


@pytest.fixture
async def remote(server) -> AsyncIterator[tuple[RemoteArtifactService, dict[str, str]]]:
    sessions = RemoteSessionService(base_url=server.base_url, api_key=server.key(APP))
    user_id = f"user-{uuid.uuid4().hex[:12]}"
    session = await sessions.create_session(app_name=APP, user_id=user_id)
    yield (
        RemoteArtifactService(client=sessions.client),
        {"app_name": APP, "user_id": user_id, "session_id": session.id},
    )
    await sessions.close()


async def test_a_save_over_the_servers_size_limit_says_so(remote):
    service, scope = remote
    huge = types.Part(inline_data=types.Blob(data=b"\x00" * (11 * 1024 * 1024), mime_type="a/b"))
    with pytest.raises(InputValidationError, match="ATTACHMENT_MAX_BYTES"):
        await service.save_artifact(**scope, filename="huge.bin", artifact=huge)
    assert await service.list_artifact_keys(**scope) == []


async def test_a_session_the_server_does_not_have_is_refused(remote):
    service, scope = remote
    with pytest.raises(SessionNotFoundError):
        await service.save_artifact(
            **{**scope, "session_id": "no-such-session"},
            filename="a.txt",
            artifact={"text": "x"},
        )


async def test_a_wrong_app_name_is_an_error_not_a_missing_file(remote):
    service, scope = remote
    wrong = {**scope, "app_name": "no-such-app"}
    calls = (
        service.load_artifact(**wrong, filename="a.txt"),
        service.list_artifact_keys(**wrong),
        service.list_versions(**wrong, filename="a.txt"),
        service.delete_artifact(**wrong, filename="a.txt"),
        service.save_artifact(**wrong, filename="a.txt", artifact={"text": "x"}),
    )
    for call in calls:
        with pytest.raises(AppNotFoundError, match="no-such-app"):
            await call


# --- ADK's Runner -------------------------------------------------------------------------------


async def save_note(text: str, tool_context: ToolContext) -> dict:
    """Keep a note as note.txt; each call adds a version."""
    version = await tool_context.save_artifact("note.txt", types.Part(text=text))
    return {"version": version}


async def read_note(version: int, tool_context: ToolContext) -> dict:
    """Read a version of note.txt."""
    part = await tool_context.load_artifact("note.txt", version=version)
    return {"text": None if part is None else part.text}


async def keep_avatar(tool_context: ToolContext) -> dict:
    """Keep the user's picture for every later conversation."""
    version = await tool_context.save_artifact("user:avatar.png", image_part(png(4, 4)))
    return {"version": version}


def tool_call(function: str, **args) -> Reply:
    return Reply([function_call_chunk(function, args), final_chunk()])


def reply(text: str) -> Reply:
    return Reply([text_chunk(text), final_chunk()])


@pytest.fixture
async def runner(server, fake_gemini, monkeypatch, server_logs_on_failure):
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-the-fake-gemini-server")
    sessions = RemoteSessionService(base_url=server.base_url, api_key=server.key(APP))
    artifacts = RemoteArtifactService(client=sessions.client)
    model = Gemini(model="gemini-2.5-flash", base_url=fake_gemini.url)
    agent = LlmAgent(
        name="assistant",
        model=model,
        instruction="You keep notes.",
        tools=[save_note, read_note, keep_avatar],
    )
    yield (
        Runner(agent=agent, app_name=APP, session_service=sessions, artifact_service=artifacts),
        sessions,
        artifacts,
    )
    await sessions.close()
    await model.api_client.aio.aclose()


async def run_turn(
    runner: Runner, fake_gemini, *, user_id: str, session_id: str, text: str, replies
):
    fake_gemini.push(*replies)
    start = len(fake_gemini.requests)
    message = types.Content(role="user", parts=[types.Part(text=text)])
    events = [
        event
        async for event in runner.run_async(
            user_id=user_id, session_id=session_id, new_message=message
        )
    ]
    assert fake_gemini.pending() == 0, "the model was asked fewer times than scripted"
    return events, fake_gemini.requests[start:]


def tool_answers(events) -> dict[str, list[dict]]:
    answers: dict[str, list[dict]] = {}
    for event in events:
        for response in event.get_function_responses():
            answers.setdefault(response.name, []).append(response.response)
    return answers


async def test_an_agent_saves_a_file_and_loads_it_back_by_version(runner, fake_gemini):
    adk_runner, sessions, artifacts = runner
    user_id = f"customer-{uuid.uuid4().hex[:10]}"
    session = await sessions.create_session(app_name=APP, user_id=user_id)

    events, _ = await run_turn(
        adk_runner,
        fake_gemini,
        user_id=user_id,
        session_id=session.id,
        text="Note that the launch is Monday, then that it moved to Friday.",
        replies=(
            tool_call("save_note", text="Launch: Monday"),
            tool_call("save_note", text="Launch: Friday"),
            tool_call("keep_avatar"),
            reply("Noted."),
        ),
    )
    answers = tool_answers(events)
    assert answers["save_note"] == [{"version": 0}, {"version": 1}]
    assert answers["keep_avatar"] == [{"version": 0}]
    deltas = [event.actions.artifact_delta for event in events if event.actions.artifact_delta]
    assert deltas == [{"note.txt": 0}, {"note.txt": 1}, {"user:avatar.png": 0}]

    events, requests = await run_turn(
        adk_runner,
        fake_gemini,
        user_id=user_id,
        session_id=session.id,
        text="What did the first note say?",
        replies=(tool_call("read_note", version=0), reply("Monday, at first.")),
    )
    assert tool_answers(events)["read_note"] == [{"text": "Launch: Monday"}]
    assert "Launch: Monday" in str(requests[-1].body)

    stored = await sessions.get_session(app_name=APP, user_id=user_id, session_id=session.id)
    assert [e.actions.artifact_delta for e in stored.events if e.actions.artifact_delta] == deltas
    scope = {"app_name": APP, "user_id": user_id, "session_id": session.id}
    assert await artifacts.list_artifact_keys(**scope) == ["note.txt", "user:avatar.png"]
    assert await artifacts.load_artifact(**scope, filename="note.txt") == types.Part(
        text="Launch: Friday"
    )
    later = await sessions.create_session(app_name=APP, user_id=user_id)
    events, _ = await run_turn(
        adk_runner,
        fake_gemini,
        user_id=user_id,
        session_id=later.id,
        text="Any notes here?",
        replies=(tool_call("read_note", version=0), reply("None in this chat.")),
    )
    assert tool_answers(events)["read_note"] == [{"text": None}]
    assert await artifacts.list_artifact_keys(
        app_name=APP, user_id=user_id, session_id=later.id
    ) == ["user:avatar.png"]


# --- The person whose files they are -----------------------------------------------------------


class Person:
    """A person signed in to the site, with the cookies their browser holds."""

    def __init__(self, base_url: str, created: dict[str, Any]) -> None:
        self.password = created["password"]
        self.http = httpx.AsyncClient(
            base_url=base_url, cookies=created["cookies"], headers={"Accept": "application/json"}
        )

    async def get(self, path: str) -> httpx.Response:
        return await self.http.get(path)

    async def delete_all_my_data(self) -> None:
        """The Settings page's "delete all my data", password and all (the account stays)."""
        page = (await self.http.get("/settings/delete/", headers={"Accept": "text/html"})).text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
        answer = await self.http.post(
            "/settings/delete/", data={"password": self.password, "csrfmiddlewaretoken": token}
        )
        assert answer.status_code == 302, answer.text


async def test_what_an_agent_saved_is_the_persons_and_goes_with_their_data(
    runner, fake_gemini, server
):
    adk_runner, sessions, artifacts = runner
    user_id = f"member-{uuid.uuid4().hex[:10]}"
    person = Person(server.base_url, server.command("person_create", app=APP, user_id=user_id))
    marker = f"Launch-{uuid.uuid4().hex[:8]}"
    session = await sessions.create_session(app_name=APP, user_id=user_id)
    await run_turn(
        adk_runner,
        fake_gemini,
        user_id=user_id,
        session_id=session.id,
        text="Keep two notes.",
        replies=(
            tool_call("save_note", text=f"{marker} Monday"),
            tool_call("save_note", text=f"{marker} Friday"),
            tool_call("keep_avatar"),
            reply("Kept."),
        ),
    )

    listed = await person.get(f"/api/sessions/{session.id}/artifacts/")
    assert listed.status_code == 200, listed.text
    files = listed.json()
    assert [(each["filename"], each["version"]) for each in files] == [
        ("note.txt", 0),
        ("note.txt", 1),
    ]
    kept = await artifacts.list_artifact_versions(
        app_name=APP, user_id=user_id, session_id=session.id, filename="note.txt"
    )
    assert [(each.version, each.create_time) for each in kept] == [
        (each["version"], each["create_time"]) for each in files
    ]
    first = await person.get(files[0]["download_url"])
    assert first.text == f"{marker} Monday"
    exported = (await person.get("/api/export/")).json()
    saved = {(each["filename"], each["version"]): each for each in exported["artifacts"]}
    assert base64.b64decode(saved[("note.txt", 1)]["data_base64"]).decode() == f"{marker} Friday"
    assert base64.b64decode(saved[("user:avatar.png", 0)]["data_base64"]) == png(4, 4)

    await person.delete_all_my_data()

    assert (await person.get(files[0]["download_url"])).status_code == 404
    assert (await person.get(f"/api/sessions/{session.id}/artifacts/")).status_code == 404
    assert server.rows_holding(marker) == {}
    assert await artifacts.list_artifact_keys(app_name=APP, user_id=user_id) == []
    await person.http.aclose()


async def test_a_rewind_takes_back_the_files_of_the_turns_it_undoes(runner, fake_gemini):
    adk_runner, sessions, artifacts = runner
    user_id = f"customer-{uuid.uuid4().hex[:10]}"
    session = await sessions.create_session(app_name=APP, user_id=user_id)
    turn = {"user_id": user_id, "session_id": session.id}
    await run_turn(
        adk_runner,
        fake_gemini,
        **turn,
        text="Note Monday.",
        replies=(tool_call("save_note", text="Monday"), reply("Noted.")),
    )
    regretted, _ = await run_turn(
        adk_runner,
        fake_gemini,
        **turn,
        text="Change it to Friday and keep my picture.",
        replies=(
            tool_call("save_note", text="Friday"),
            tool_call("keep_avatar"),
            reply("Done."),
        ),
    )

    await adk_runner.rewind_async(**turn, rewind_before_invocation_id=regretted[0].invocation_id)

    scope = {"app_name": APP, **turn}
    assert await artifacts.load_artifact(**scope, filename="note.txt") == types.Part(text="Monday")
    assert await artifacts.list_versions(**scope, filename="note.txt") == [0, 1, 2]
    assert await artifacts.load_artifact(**scope, filename="user:avatar.png") == image_part(
        png(4, 4)
    )


async def test_a_file_saved_after_the_rewind_point_loads_as_absent(runner, fake_gemini):
    adk_runner, sessions, artifacts = runner
    user_id = f"customer-{uuid.uuid4().hex[:10]}"
    session = await sessions.create_session(app_name=APP, user_id=user_id)
    turn = {"user_id": user_id, "session_id": session.id}
    await run_turn(adk_runner, fake_gemini, **turn, text="Hello.", replies=(reply("Hi."),))
    regretted, _ = await run_turn(
        adk_runner,
        fake_gemini,
        **turn,
        text="Note Friday.",
        replies=(tool_call("save_note", text="Friday"), reply("Noted.")),
    )

    await adk_runner.rewind_async(**turn, rewind_before_invocation_id=regretted[0].invocation_id)

    scope = {"app_name": APP, **turn, "filename": "note.txt"}
    assert await artifacts.load_artifact(**scope) is None
    assert await artifacts.load_artifact(**scope, version=0) == types.Part(text="Friday")
    assert await artifacts.list_versions(**scope) == [0, 1]
