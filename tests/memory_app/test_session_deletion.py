"""Deleting a session follows provenance: memories it alone supported go, others are revised."""

import time

import pytest

from memory_app.models import Memory, MemoryRevision, MemoryScope, MemorySource
from sessions_app import services as session_services
from sessions_app.models import SessionRecord
from tests.factories import session_key
from tests.memory_app.support import (
    APP,
    lexical_only,  # noqa: F401 (fixture)
    memory_make,
    session_make,
    turn_add,
    user_events,
)

pytestmark = pytest.mark.usefixtures("lexical_only")


@pytest.fixture
def two_sessions(user):
    first, second = session_make(user), session_make(user)
    turn_add(first, "I live in Porto and I have a cat")
    turn_add(second, "Still in Porto, by the way")
    return first, second


def delete(user, session):
    return session_services.session_delete(
        app_name=APP, user_id=str(user.pk), session_id=session.id
    )


def test_a_memory_sourced_only_in_the_session_is_deleted(user, two_sessions):
    first, _ = two_sessions
    memory = memory_make(user=user, text="The user has a cat", sources=user_events(first.id))

    assert delete(user, first)

    assert not Memory.objects.filter(pk=memory.pk).exists()


def test_a_memory_with_other_sources_is_revised_and_kept(user, two_sessions):
    first, second = two_sessions
    [first_event], [second_event] = user_events(first.id), user_events(second.id)
    memory = memory_make(
        user=user, text="The user lives in Porto", sources=[first_event, second_event]
    )

    delete(user, first)

    assert Memory.objects.filter(pk=memory.pk).exists()
    assert list(MemorySource.objects.filter(memory=memory).values_list("event_id", flat=True)) == [
        second_event.pk
    ]
    [revision] = MemoryRevision.objects.filter(memory=memory)
    assert revision.action == MemoryRevision.Action.SOURCES_CHANGED
    assert first.id in revision.reason
    assert revision.before["sources"] == [
        {"session_id": first.id, "event_id": first_event.event_id},
        {"session_id": second.id, "event_id": second_event.event_id},
    ]
    assert revision.after["sources"] == [
        {"session_id": second.id, "event_id": second_event.event_id}
    ]


def test_session_memories_go_and_unsourced_memories_stay(user, two_sessions):
    first, _ = two_sessions
    scoped = memory_make(
        user=user,
        scope=MemoryScope.SESSION,
        session_id=session_key(first),
        text="Draft title: Rivers",
    )
    unsourced = memory_make(user=user, text="The user was added by hand")

    delete(user, first)

    assert not Memory.objects.filter(pk=scoped.pk).exists()
    assert Memory.objects.filter(pk=unsourced.pk).exists()


def test_the_idle_session_cleanup_follows_provenance_too(user, two_sessions, settings):
    first, second = two_sessions
    only_first = memory_make(user=user, text="The user has a cat", sources=user_events(first.id))
    both = memory_make(
        user=user,
        text="The user lives in Porto",
        sources=user_events(first.id) + user_events(second.id),
    )
    settings.SESSION_IDLE_TTL_SECONDS = 60
    SessionRecord.objects.filter(session_id=first.id).update(last_update_time=time.time() - 3600)

    assert session_services.sessions_expire_idle() == 1

    assert not Memory.objects.filter(pk=only_first.pk).exists()
    assert MemoryRevision.objects.filter(
        memory=both, action=MemoryRevision.Action.SOURCES_CHANGED
    ).exists()


def test_a_deleted_sessions_memory_leaves_search(user, two_sessions):
    from memory_app.selectors import memory_search

    first, _ = two_sessions
    memory_make(user=user, text="The user has a cat", sources=user_events(first.id))
    assert memory_search(app_name=APP, user_pk=user.pk, query="cat") != []

    delete(user, first)

    assert memory_search(app_name=APP, user_pk=user.pk, query="cat") == []


def test_sessions_released_together_delete_what_only_they_supported_and_revise_the_rest(user):
    from memory_app.services import session_memories_release

    first, second, kept = session_make(user), session_make(user), session_make(user)
    for session in (first, second, kept):
        turn_add(session, "I live in Porto and I have a cat")
    events = {session.id: user_events(session.id) for session in (first, second, kept)}
    only_theirs = memory_make(
        user=user, text="The user has a cat", sources=events[first.id] + events[second.id]
    )
    one_gone = memory_make(
        user=user, text="The user lives in Porto", sources=events[first.id] + events[kept.id]
    )
    both_gone = memory_make(
        user=user,
        text="The user lives near the river",
        sources=events[first.id] + events[second.id] + events[kept.id],
    )

    report = session_memories_release(session_ids=[session_key(first), session_key(second)])

    assert report.deleted == [str(only_theirs.pk)]
    assert sorted(report.revised) == sorted([str(one_gone.pk), str(both_gone.pk)])
    assert not Memory.objects.filter(pk=only_theirs.pk).exists()
    for memory in (one_gone, both_gone):
        [revision] = MemoryRevision.objects.filter(memory=memory)
        assert revision.after["sources"] == [
            {"session_id": kept.id, "event_id": events[kept.id][0].event_id}
        ]
        assert list(
            MemorySource.objects.filter(memory=memory).values_list("event_id", flat=True)
        ) == [events[kept.id][0].pk]
    assert MemoryRevision.objects.get(memory=one_gone).reason.startswith(f"Session {first.id} was")
    assert MemoryRevision.objects.get(memory=both_gone).reason.startswith(
        f"Sessions {', '.join(sorted([first.id, second.id]))} were deleted"
    )


def test_a_session_that_made_no_memory_is_released_in_one_query(
    user, two_sessions, django_assert_num_queries
):
    from memory_app.services import session_memories_release

    first, second = two_sessions
    memory_make(user=user, text="The user lives in Porto", sources=user_events(second.id))

    with django_assert_num_queries(1):
        report = session_memories_release(session_ids=[first.id])

    assert report.deleted == report.revised == []


def _expire_sessions_with_a_memory(user, count, settings):
    sessions = [session_make(user) for _ in range(count)]
    memories = []
    for session in sessions:
        turn_add(session, "I have a cat")
        memories.append(
            memory_make(user=user, text="The user has a cat", sources=user_events(session.id))
        )
    settings.SESSION_IDLE_TTL_SECONDS = 60
    SessionRecord.objects.filter(session_id__in=[s.id for s in sessions]).update(
        last_update_time=time.time() - 3600
    )
    return memories


def test_the_idle_cleanup_settles_a_batch_of_sessions_at_once(user, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for count in (2, 6):
        memories = _expire_sessions_with_a_memory(user, count, settings)
        with CaptureQueriesContext(connection) as queries:
            assert session_services.sessions_expire_idle() == count
        counts.append(len(queries.captured_queries))
        assert not Memory.objects.filter(pk__in=[m.pk for m in memories]).exists()

    assert counts[0] == counts[1], "the queries do not grow with the sessions of a batch"
