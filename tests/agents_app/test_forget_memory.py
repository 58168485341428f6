"""Forgetting in chat: "forget that ...", "don't remember ...", "delete what you know about my
..." retire the person's own matching memories, as the Memory page's Delete does, and the reply
names them; several matches are asked about; nothing of another person is ever touched."""

import pytest
from asgiref.sync import sync_to_async
from google.genai import types

from agents_app.forget_memory import FORGET_MEMORY_TOOL
from agents_app.runtime.agents import AgentConfig
from agents_app.runtime.offline import OfflineModel
from agents_app.runtime.runner import Runner
from agents_app.runtime.tools import ToolContext
from memory_app.extraction import facts_extract
from memory_app.models import Memory, MemoryStatus
from memory_app.topics import topics_for_app
from sessions_app.events import Event
from tests.memory_app.support import (
    APP,
    lexical_only,  # noqa: F401 (fixture)
    memory_make,
    session_make,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("lexical_only", "background_finished"),
]


async def say(runner, user, session_id, text):
    message = types.Content(role="user", parts=[types.Part(text=text)])
    events = [
        event
        async for event in runner.run_async(
            user_id=str(user.pk), session_id=session_id, new_message=message
        )
    ]
    return events[-1].text()


@pytest.fixture
def runner(settings):
    settings.MEMORY_TRIGGERS = {APP: {"every_n_turns": 0, "explicit": False}}
    return Runner(
        agent=AgentConfig(app_name=APP, model="offline"), model=OfflineModel(chunk_delay=0)
    )


def active_texts(user):
    return sorted(
        Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE).values_list("text", flat=True)
    )


async def test_forget_that_retires_the_memory_and_the_reply_names_it(owner, runner):
    await sync_to_async(memory_make)(user=owner, text="The user's sister Ana lives in Braga.")
    await sync_to_async(memory_make)(user=owner, text="The user lives in Lisbon.")
    chat = await sync_to_async(session_make)(owner)

    reply = await say(runner, owner, chat.id, "Forget that my sister lives in Braga.")

    assert "forgotten" in reply and "your sister Ana lives in Braga" in reply, reply
    assert await sync_to_async(active_texts)(owner) == ["The user lives in Lisbon."]
    listed = await say(runner, owner, chat.id, "What do you know about me?")
    assert "Braga" not in listed and "Lisbon" in listed, listed


@pytest.mark.parametrize(
    "request_text",
    [
        "Please don't remember that my partner is a radiologist.",
        "Please forget that my partner is a radiologist.",
        "delete what you know about my partner",
    ],
)
async def test_each_phrasing_is_understood(owner, runner, request_text):
    await sync_to_async(memory_make)(user=owner, text="The user's partner Marek is a radiologist.")
    chat = await sync_to_async(session_make)(owner)

    reply = await say(runner, owner, chat.id, request_text)

    assert "Marek" in reply and "forgotten" in reply, reply
    assert await sync_to_async(active_texts)(owner) == []


async def test_several_matches_are_asked_about_and_none_is_forgotten(owner, runner):
    for text in ("The user's sister Ana lives in Braga.", "The user's sister Rita lives in Braga."):
        await sync_to_async(memory_make)(user=owner, text=text)
    chat = await sync_to_async(session_make)(owner)

    reply = await say(runner, owner, chat.id, "Forget that my sister lives in Braga.")

    assert reply.startswith("Which one should I forget?"), reply
    assert "Ana" in reply and "Rita" in reply
    assert len(await sync_to_async(active_texts)(owner)) == 2
    # Everything about it, asked for, goes at once.
    reply = await say(runner, owner, chat.id, "Delete everything you know about my sister.")
    assert await sync_to_async(active_texts)(owner) == []


async def test_nothing_matching_is_said_plainly(owner, runner):
    await sync_to_async(memory_make)(user=owner, text="The user lives in Lisbon.")
    chat = await sync_to_async(session_make)(owner)

    reply = await say(runner, owner, chat.id, "Forget that my dog is called Rex.")

    assert "nothing to forget" in reply, reply
    assert await sync_to_async(active_texts)(owner) == ["The user lives in Lisbon."]


async def test_another_persons_memory_is_never_forgotten(owner, other_user, runner):
    theirs = await sync_to_async(memory_make)(
        user=other_user, text="The user's sister Ana lives in Braga."
    )
    shared = await sync_to_async(memory_make)(
        user=None, scope="app", text="The user's sister lives in Braga is a test phrase."
    )
    chat = await sync_to_async(session_make)(owner)

    # A crafted message naming the other person's memory by id, and their words.
    reply = await say(runner, owner, chat.id, f"Forget that my sister lives in Braga {theirs.pk}.")
    context = ToolContext(
        app_name=APP,
        user_id=str(owner.pk),
        session_id=chat.id,
        invocation_id="inv",
        agent_name="assistant",
        state={},
    )
    direct = await FORGET_MEMORY_TOOL.run(
        {"about": "sister", "memory_ids": [str(theirs.pk), str(shared.pk)]}, context
    )

    assert "nothing to forget" in reply, reply
    assert direct == {"status": "ok", "forgotten": []}
    assert await Memory.objects.filter(pk=theirs.pk, status=MemoryStatus.ACTIVE).aexists()
    assert await Memory.objects.filter(pk=shared.pk).aexists()


async def test_a_temporary_chat_offers_no_forgetting(owner, runner):
    await sync_to_async(memory_make)(user=owner, text="The user's sister Ana lives in Braga.")
    chat = await sync_to_async(session_make)(owner, temporary=True)

    await say(runner, owner, chat.id, "Forget that my sister lives in Braga.")

    assert len(await sync_to_async(active_texts)(owner)) == 1


async def test_bad_arguments_are_refused_clearly(owner):
    chat = await sync_to_async(session_make)(owner)
    context = ToolContext(
        app_name=APP,
        user_id=str(owner.pk),
        session_id=chat.id,
        invocation_id="inv",
        agent_name="assistant",
        state={},
    )
    for args in ({}, {"about": 3}, {"about": "x" * 501}, {"about": "x", "memory_ids": "id"}):
        assert (await FORGET_MEMORY_TOOL.run(args, context))["status"] == "error"


def test_a_request_to_forget_is_never_remembered(db):
    said = Event(
        invocation_id="i",
        author="user",
        content=types.Content(
            role="user", parts=[types.Part(text="Please forget that I live in Porto.")]
        ),
    )
    assert facts_extract(app_name=APP, events=[said], topics=topics_for_app(app_name=APP)) == []
