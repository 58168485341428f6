"""Session ids as ADK's: unique within an (app, end user), so ADK's Runner with a fixed id
keeps one conversation for each person in each app; a wrong app name says so."""

from __future__ import annotations

import json
import uuid

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.genai import types
from tests.fake_gemini import Reply, final_chunk, text_chunk

from agent_memory_client import AppNotFoundError, ConflictError, NotFoundError
from agent_memory_client.adk import RemoteSessionService

SESSION_ID = "first-chat"


def _runner(*, fake_gemini, app: str, sessions: RemoteSessionService) -> Runner:
    agent = LlmAgent(
        name="assistant", model=Gemini(model="gemini-2.5-flash", base_url=fake_gemini.url)
    )
    return Runner(agent=agent, app_name=app, session_service=sessions, auto_create_session=True)


async def _turn(runner: Runner, fake_gemini, *, user_id: str, text: str) -> list[str]:
    """One turn of ``user_id`` in the fixed session; the texts the model was sent."""
    fake_gemini.push(Reply([text_chunk(f"noted: {text}"), final_chunk()]))
    first = len(fake_gemini.requests)
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in runner.run_async(user_id=user_id, session_id=SESSION_ID, new_message=message):
        pass
    assert fake_gemini.pending() == 0
    return [json.dumps(request.body) for request in fake_gemini.requests[first:]]


@pytest.fixture
def apps(server) -> list[str]:
    return [f"ids-{name}-{uuid.uuid4().hex[:8]}" for name in ("shop", "travel")]


@pytest.fixture
async def services(server, apps):
    opened = {
        app: RemoteSessionService(base_url=server.base_url, api_key=server.key(app)) for app in apps
    }
    yield opened
    for service in opened.values():
        await service.close()


async def test_a_fixed_session_id_keeps_one_conversation_per_user_per_app(
    server, fake_gemini, monkeypatch, server_logs_on_failure, apps, services
):
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-the-fake-gemini-server")
    users = [f"person-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    runners = {
        app: _runner(fake_gemini=fake_gemini, app=app, sessions=services[app]) for app in apps
    }
    said = {(app, user): f"my code is {app}-{user}" for app in apps for user in users}

    for (app, user), text in said.items():
        await _turn(runners[app], fake_gemini, user_id=user, text=text)
    for (app, user), text in said.items():
        sent = await _turn(runners[app], fake_gemini, user_id=user, text="what did I say?")
        others = [other for key, other in said.items() if key != (app, user)]
        assert text in sent[-1], "the turn before is in the same conversation"
        assert not any(other in sent[-1] for other in others)

    for app in apps:
        for user in users:
            session = await services[app].get_session(
                app_name=app, user_id=user, session_id=SESSION_ID
            )
            assert session.id == SESSION_ID
            user_texts = [
                event.content.parts[0].text for event in session.events if event.author == "user"
            ]
            assert user_texts == [said[(app, user)], "what did I say?"]
            listed = await services[app].list_sessions(app_name=app, user_id=user)
            assert [each.id for each in listed.sessions] == [SESSION_ID]


async def test_an_id_the_user_has_in_the_app_is_refused_as_adk_refuses_it(apps, services):
    app, other_app = apps
    user, other_user = (f"person-{uuid.uuid4().hex[:8]}" for _ in range(2))
    await services[app].create_session(app_name=app, user_id=user, session_id=SESSION_ID)

    with pytest.raises(AlreadyExistsError) as refused:
        await services[app].create_session(app_name=app, user_id=user, session_id=SESSION_ID)
    assert isinstance(refused.value, ConflictError)

    for service, app_name, owner in (
        (services[app], app, other_user),
        (services[other_app], other_app, user),
    ):
        assert (
            await service.get_session(app_name=app_name, user_id=owner, session_id=SESSION_ID)
            is None
        )
        created = await service.create_session(
            app_name=app_name, user_id=owner, session_id=SESSION_ID, state={"mine": owner}
        )
        assert created.id == SESSION_ID and created.state == {"mine": owner}


async def test_a_wrong_app_name_in_the_runner_names_the_app(
    fake_gemini, monkeypatch, apps, services
):
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-the-fake-gemini-server")
    app = apps[0]
    runner = _runner(fake_gemini=fake_gemini, app="no-such-app", sessions=services[app])
    message = types.Content(role="user", parts=[types.Part(text="hello")])

    with pytest.raises(AppNotFoundError, match="no-such-app") as raised:
        async for _ in runner.run_async(
            user_id="someone", session_id=SESSION_ID, new_message=message
        ):
            pass
    assert raised.value.app_name == "no-such-app"
    assert isinstance(raised.value, NotFoundError | LookupError)


LOOK_ALIKE_USER_IDS = ["Ada Lovelace", "ada lovelace", "Ada Lovelace ", "org/123", "org%2F123"]
LOOK_ALIKE_SESSION_IDS = ["chat 1", "Chat 1", "chat 1 ", "a/b", "100%", "caf\u00e9", "cafe\u0301"]


async def test_ids_are_any_string_and_look_alikes_stay_apart_as_in_adk(subject, user_id):
    """ADK's services take any string as a user or session id and keep it as given: ids that
    differ only in case, a trailing space, a ``/`` spelled out or Unicode normalisation are
    different people and different conversations."""
    service, app = subject.service, subject.app_name
    users = [f"{user_id} {suffix}" for suffix in LOOK_ALIKE_USER_IDS] + ["\u00e9" * 128]
    session_ids = LOOK_ALIKE_SESSION_IDS
    if subject.name == "in_memory":  # it strips a session id's surrounding whitespace
        session_ids = [session_id for session_id in session_ids if session_id.strip() == session_id]
    for user in users:
        for session_id in session_ids:
            created = await service.create_session(
                app_name=app, user_id=user, session_id=session_id, state={"of": [user, session_id]}
            )
            assert (created.user_id, created.id) == (user, session_id)

    for user in users:
        listed = await service.list_sessions(app_name=app, user_id=user)
        assert sorted(session.id for session in listed.sessions) == sorted(session_ids)
        for session_id in session_ids:
            got = await service.get_session(app_name=app, user_id=user, session_id=session_id)
            assert (got.user_id, got.id, got.state["of"]) == (user, session_id, [user, session_id])
    assert await service.get_session(app_name=app, user_id=users[0], session_id="chat") is None


async def test_a_session_id_of_128_characters_is_kept_as_in_adk(subject, user_id):
    session_id = "\u4f1a" * 128
    created = await subject.service.create_session(
        app_name=subject.app_name, user_id=user_id, session_id=session_id
    )
    got = await subject.service.get_session(
        app_name=subject.app_name, user_id=user_id, session_id=session_id
    )
    assert created.id == got.id == session_id


async def test_a_session_id_over_128_characters_is_refused_by_the_remote_service(server, user_id):
    """ADK's in-memory service keeps any length and its database service's column holds 128
    characters (SQLite does not enforce it; PostgreSQL refuses more): the server refuses
    more, saying so, and stores nothing."""
    service = RemoteSessionService(base_url=server.base_url, api_key=server.key("adk-semantics"))
    try:
        with pytest.raises(ValueError, match="1-128 characters"):
            await service.create_session(
                app_name="adk-semantics", user_id=user_id, session_id="s" * 129
            )
        listed = await service.list_sessions(app_name="adk-semantics", user_id=user_id)
        assert listed.sessions == []
    finally:
        await service.close()
