"""MemoryService: ADK's BaseMemoryService API over long-term memory."""

import pytest
from asgiref.sync import sync_to_async

from core.background import background_wait_idle
from memory_app.adk import MemoryService, SearchMemoryResponse
from memory_app.models import GenerationJob, Memory
from sessions_app import selectors as session_selectors
from tests.factories import UserFactory
from tests.memory_app.support import (
    APP,
    lexical_only,  # noqa: F401 (fixture)
    session_make,
    turn_add,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("lexical_only")]

service = MemoryService()


@pytest.fixture
def owner(transactional_db):
    return UserFactory()


@sync_to_async
def conversation(user, *texts):
    session = session_make(user)
    for text in texts:
        turn_add(session, text)
    return session_selectors.session_get(app_name=APP, user_id=str(user.pk), session_id=session.id)


async def test_add_session_then_search_returns_memories_with_score_and_sources(owner):
    session = await conversation(owner, "I live in Porto.", "I have a cat named Tom.")

    assert await service.add_session_to_memory(session, wait=True) == "succeeded"
    response = await service.search_memory(app_name=APP, user_id=str(owner.pk), query="cat Tom")

    assert isinstance(response, SearchMemoryResponse)
    best = response.memories[0]
    assert "Tom" in best.text and best.content.parts[0].text == best.text
    assert best.score > 0 and best.id
    tom_event = session.events[2]
    assert [(s.session_id, s.event_id) for s in best.sources] == [(session.id, tom_event.id)]


async def test_add_session_in_the_background(owner, settings):
    settings.BACKGROUND_TASKS = "inprocess"  # no worker reads the broker in this test
    session = await conversation(owner, "I live in Porto.")

    assert await service.add_session_to_memory(session) == "queued"
    await sync_to_async(background_wait_idle)()

    job = await GenerationJob.objects.aget()
    assert (job.trigger, job.status) == (
        GenerationJob.Trigger.SESSION_END,
        GenerationJob.Status.SUCCEEDED,
    )


async def test_add_and_delete_memory(owner):
    other = await sync_to_async(UserFactory)()
    [memory_id] = await service.add_memory(
        app_name=APP, user_id=str(owner.pk), text="The user's favourite colour is teal."
    )
    response = await service.search_memory(app_name=APP, user_id=str(owner.pk), query="colour")
    assert [m.id for m in response.memories] == [memory_id]
    empty = await service.search_memory(app_name=APP, user_id=str(other.pk), query="colour")
    assert empty.memories == []

    assert not await service.delete_memory(app_name=APP, user_id=str(other.pk), memory_id=memory_id)
    assert not await service.delete_memory(app_name=APP, user_id=str(owner.pk), memory_id="nope")
    assert await service.delete_memory(app_name=APP, user_id=str(owner.pk), memory_id=memory_id)

    assert not await Memory.objects.filter(pk=memory_id).aexists()
    response = await service.search_memory(app_name=APP, user_id=str(owner.pk), query="colour")
    assert response.memories == []


async def test_unknown_users_get_nothing(owner):
    response = await service.search_memory(app_name=APP, user_id="not-a-user", query="anything")
    assert response.memories == []
