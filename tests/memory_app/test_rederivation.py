"""A memory that loses some of its sources (a chat deleted, a turn rewound, a file removed, a
session expired) is derived again from those it keeps, through the same extraction and
consolidation, in the background; one left with no source is deleted."""

from datetime import timedelta

import pytest
from django.utils import timezone
from google.genai import types

from core.background import background_wait_idle
from core.llm import ModelError
from memory_app import services
from memory_app.models import (
    Memory,
    MemoryRederivation,
    MemoryRevision,
    MemorySource,
    MemoryStatus,
)
from memory_app.services import rederivation
from memory_app.tasks import memory_rederive as rederive_task
from sessions_app import services as session_services
from sessions_app.models import SessionRecord
from tests.factories import session_key
from tests.memory_app.support import (
    APP,
    generate,
    lexical_only,  # noqa: F401 (fixture)
    memory_make,
    offline,  # noqa: F401 (fixture)
    session_make,
    turn_add,
    user_events,
)

pytestmark = pytest.mark.usefixtures("lexical_only", "offline")


def titled(session, title):
    SessionRecord.objects.filter(session_id=session.id).update(title=title)


def delete(user, session):
    assert session_services.session_delete(
        app_name=APP, user_id=str(user.pk), session_id=session.id
    )


def active(user):
    return list(
        Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE).values_list("text", flat=True)
    )


@pytest.fixture
def moved(user):
    """Lisbon said in one chat, the move to Porto in another, both remembered."""
    lisbon, porto = session_make(user), session_make(user)
    titled(lisbon, "Settling in")
    titled(porto, "Moving north")
    turn_add(lisbon, "I live in Lisbon.")
    generate(user, lisbon)
    turn_add(porto, "I moved to Porto.")
    generate(user, porto)
    [memory] = Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE)
    assert "Porto" in memory.text
    return lisbon, porto, memory


def test_deleting_the_chat_that_changed_a_memory_derives_it_again_from_the_rest(user, moved):
    _, porto, memory = moved

    delete(user, porto)
    assert MemoryRederivation.objects.filter(memory=memory).exists()
    assert services.memory_rederive(memory_id=str(memory.pk)) == "updated"

    memory.refresh_from_db()
    assert memory.text == "The user lives in Lisbon."
    assert active(user) == ["The user lives in Lisbon."]
    revision = MemoryRevision.objects.filter(memory=memory).latest("created_at")
    assert revision.action == MemoryRevision.Action.UPDATED
    assert "Porto" in revision.before["text"]
    today = timezone.now()
    assert revision.reason == (
        f"Derived again on {today.day} {today:%b} "
        "after you deleted the chat \u201cMoving north\u201d."
    )
    assert not MemoryRederivation.objects.filter(memory=memory).exists()
    # Idempotent: a redelivered task finds nothing to do, and writes nothing.
    assert services.memory_rederive(memory_id=str(memory.pk)) == "none"
    MemoryRederivation.objects.create(memory=memory, cause="again", requested_at=timezone.now())
    assert services.memory_rederive(memory_id=str(memory.pk)) == "unchanged"
    assert MemoryRevision.objects.filter(memory=memory).latest("created_at") == revision


def test_deleting_the_first_chat_keeps_what_the_remaining_one_says(user, moved):
    lisbon, _, memory = moved
    text = memory.text

    delete(user, lisbon)
    services.memory_rederive(memory_id=str(memory.pk))

    memory.refresh_from_db()
    assert memory.text == text
    assert "Lisbon" not in " ".join(memory.sources.values_list("excerpt", flat=True))


def test_a_memory_left_with_no_source_is_deleted_as_before(user):
    only = session_make(user)
    turn_add(only, "I live in Lisbon.")
    generate(user, only)
    [memory] = Memory.objects.filter(user=user)

    delete(user, only)

    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert not MemoryRederivation.objects.exists()


def test_confidence_rises_with_corroboration_and_drops_with_a_contradiction(user):
    first, second, third = session_make(user), session_make(user), session_make(user)
    for session, said in ((first, "I live in Lisbon."), (second, "I live in Lisbon.")):
        turn_add(session, said)
        generate(user, session)
    turn_add(third, "I moved to Porto.")
    generate(user, third)
    [memory] = Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE)

    # Without the chat that moved them, Lisbon is said twice: corroborated.
    delete(user, third)
    services.memory_rederive(memory_id=str(memory.pk))
    memory.refresh_from_db()
    assert memory.text == "The user lives in Lisbon."
    corroborated = memory.confidence
    # Said once only: less sure than said twice.
    delete(user, second)
    services.memory_rederive(memory_id=str(memory.pk))
    memory.refresh_from_db()
    said_once = memory.confidence
    assert said_once < corroborated


def test_a_value_the_remaining_sources_contradict_is_held_less_surely(user):
    """Lisbon, then Porto twice; one Porto chat deleted: Porto stands, its confidence lowered
    by the contradiction Lisbon makes."""
    first, second, third = session_make(user), session_make(user), session_make(user)
    for session, said in ((first, "I live in Lisbon."), (second, "I moved to Porto.")):
        turn_add(session, said)
        generate(user, session)
    turn_add(third, "I moved to Porto.")
    generate(user, third)
    [memory] = Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE)

    delete(user, third)
    services.memory_rederive(memory_id=str(memory.pk))
    memory.refresh_from_db()

    assert "Porto" in memory.text
    items, _ = rederivation._facts_of_sources(memory)
    porto_said = next(item for item, _ in items if "Porto" in item.text).fact.confidence
    assert memory.confidence == pytest.approx(
        porto_said - rederivation.CONTRADICTION_CONFIDENCE_STEP
    )


def test_a_rewound_turn_derives_the_memory_again(user, moved):
    _, porto, memory = moved
    porto_turn = user_events(porto.id)[0].invocation_id
    session_services.session_rewind(
        app_name=APP,
        user_id=str(user.pk),
        session_id=porto.id,
        rewind_before_invocation_id=porto_turn,
    )
    services.session_rewound_memories_release(session_id=session_key(porto))
    services.memory_rederive(memory_id=str(memory.pk))

    memory.refresh_from_db()
    assert memory.text == "The user lives in Lisbon."
    reason = MemoryRevision.objects.filter(memory=memory).latest("created_at").reason
    assert reason.endswith(
        "after you edited or regenerated a message in the chat \u201cMoving north\u201d."
    )


def test_an_expired_session_says_so(user, moved, settings):
    _, porto, memory = moved
    settings.SESSION_IDLE_TTL_SECONDS = 60
    SessionRecord.objects.filter(session_id=porto.id).update(
        last_update_time=timezone.now().timestamp() - 3600
    )

    assert session_services.sessions_expire_idle() == 1
    services.memory_rederive(memory_id=str(memory.pk))

    memory.refresh_from_db()
    assert memory.text == "The user lives in Lisbon."
    reason = MemoryRevision.objects.filter(memory=memory).latest("created_at").reason
    assert reason.endswith("after the chat \u201cMoving north\u201d expired.")


def test_another_users_deletion_never_touches_this_memory(user, other_user, moved):
    memory = moved[2]
    theirs = session_make(other_user)
    turn_add(theirs, "I live in Braga.")
    generate(other_user, theirs)

    delete(other_user, theirs)

    assert not MemoryRederivation.objects.filter(memory=memory).exists()
    memory.refresh_from_db()
    assert "Porto" in memory.text


def test_a_transient_model_error_is_retried_then_kept_as_failed(user, moved, monkeypatch, settings):
    _, porto, memory = moved
    delete(user, porto)
    settings.MEMORY_TASK_MAX_RETRIES = 0

    def unavailable(**kwargs):
        raise ModelError("the model is busy", transient=True)

    monkeypatch.setattr(rederivation, "facts_extract", unavailable)
    assert rederive_task.apply(kwargs={"memory_id": str(memory.pk)}).get() == "failed"

    request = MemoryRederivation.objects.get(memory=memory)
    assert "busy" in request.error
    memory.refresh_from_db()
    assert "Porto" in memory.text, "left as it was, not half-derived"
    # A failed request is not sent again by the sweep; a new request clears the error.
    later = timezone.now() + timedelta(days=1)
    assert services.memory_rederivations_sweep(now=later) == 0


@pytest.mark.django_db(transaction=True)
def test_the_deletion_derives_it_again_in_the_background(settings, user, moved):
    settings.BACKGROUND_TASKS = "inprocess"
    _, porto, memory = moved

    delete(user, porto)
    background_wait_idle()

    memory.refresh_from_db()
    assert memory.text == "The user lives in Lisbon."
    assert not MemoryRederivation.objects.exists()


def test_a_request_whose_task_was_lost_is_sent_by_the_sweep(user, moved, monkeypatch):
    _, porto, memory = moved
    delete(user, porto)
    sent = []
    monkeypatch.setattr(rederivation, "task_enqueue", lambda *, task, **kwargs: sent.append(kwargs))

    assert services.memory_rederivations_sweep() == 0, "not yet: the task may be on its way"
    later = timezone.now() + timedelta(hours=1)
    assert services.memory_rederivations_sweep(now=later) == 1
    assert sent == [{"memory_id": str(memory.pk)}]


def test_removing_a_file_a_memory_was_drawn_from_releases_it(user):
    chat, other = session_make(user), session_make(user)
    turn_add(chat, "Here is my CV.")
    turn_add(other, "I work as a nurse.")
    record = session_services.artifact_save(
        app_name=APP,
        user_id=str(user.pk),
        filename="cv.txt",
        artifact=types.Part(text="Nurse at Santa Maria."),
        session_id=chat.id,
    )
    [with_file], [said] = user_events(chat.id), user_events(other.id)
    from_file_only = memory_make(user=user, text="The user has a CV", sources=[with_file])
    both = memory_make(user=user, text="The user works as a nurse.", sources=[with_file, said])
    MemorySource.objects.filter(event=with_file).update(artifact=record)

    session_services.artifact_delete(
        app_name=APP, user_id=str(user.pk), filename="cv.txt", session_id=chat.id
    )

    assert not Memory.objects.filter(pk=from_file_only.pk).exists()
    assert list(both.sources.values_list("event", flat=True)) == [said.pk]
    request = MemoryRederivation.objects.get(memory=both)
    assert request.cause == "after you removed the file \u201ccv.txt\u201d"
    assert services.memory_rederive(memory_id=str(both.pk)) == "unchanged"
    both.refresh_from_db()
    assert both.text == "The user works as a nurse."
