"""A rewind (an edited message, a regenerated reply) revises the memories of the turns it took
out of the history through their provenance, as deleting a session does; and it does so
after the rewind has committed, in the background."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db.models.signals import post_delete
from django.utils import timezone

from core.background import background_wait_idle
from memory_app import services
from memory_app.consolidation import decisions
from memory_app.models import (
    Memory,
    MemoryRevision,
    MemorySource,
    MemoryWatermark,
    RewindRelease,
)
from memory_app.selectors import generation
from memory_app.selectors.generation import watermark_get
from memory_app.services import jobs, session_rewound_memories_release
from memory_app.tasks import rewind_releases_sweep
from sessions_app import services as session_services
from sessions_app.models import EventRecord
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


def rewind(user, session, invocation_id):
    return session_services.session_rewind(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session.id,
        rewind_before_invocation_id=invocation_id,
    )


@pytest.fixture
def chat(user):
    """A session with two turns, and another session of the same user."""
    session, other = session_make(user), session_make(user)
    turn_add(session, "I live in Porto")
    second = turn_add(session, "I have a cat called Miso")
    turn_add(other, "Still in Porto")
    return session, other, second


def test_a_memory_only_the_rewound_turn_supported_is_deleted(user, chat):
    session, _, second = chat
    first_event, second_event = user_events(session.id)
    cat = memory_make(user=user, text="The user has a cat called Miso", sources=[second_event])
    porto = memory_make(user=user, text="The user lives in Porto", sources=[first_event])
    rewind(user, session, second)

    report = session_rewound_memories_release(session_id=session_key(session))

    assert report.deleted == [str(cat.pk)]
    assert report.revised == []
    assert not Memory.objects.filter(pk=cat.pk).exists()
    assert Memory.objects.filter(pk=porto.pk).exists()
    assert not MemoryRevision.objects.filter(memory=porto).exists()


def test_a_memory_with_sources_outside_the_rewound_turns_is_revised(user, chat):
    session, other, second = chat
    [_, rewound_event] = user_events(session.id)
    [other_event] = user_events(other.id)
    memory = memory_make(
        user=user, text="The user lives in Porto", sources=[rewound_event, other_event]
    )
    rewind(user, session, second)

    report = session_rewound_memories_release(session_id=session_key(session))

    assert report.revised == [str(memory.pk)]
    assert list(MemorySource.objects.filter(memory=memory).values_list("event_id", flat=True)) == [
        other_event.pk
    ]
    [revision] = MemoryRevision.objects.filter(memory=memory)
    assert revision.action == MemoryRevision.Action.SOURCES_CHANGED
    assert "edited or regenerated" in revision.reason
    assert revision.after["sources"] == [{"session_id": other.id, "event_id": other_event.event_id}]
    # Running it again (a redelivered task, a later rewind) changes nothing more.
    assert session_rewound_memories_release(session_id=session_key(session)).revised == []
    assert MemoryRevision.objects.filter(memory=memory).count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_rewind_itself_revises_them_after_it_commits(settings, user, chat):
    settings.BACKGROUND_TASKS = "inprocess"
    session, _, second = chat
    [_, rewound_event] = user_events(session.id)
    cat = memory_make(user=user, text="The user has a cat called Miso", sources=[rewound_event])

    rewind(user, session, second)
    background_wait_idle()

    assert not Memory.objects.filter(pk=cat.pk).exists()
    # Done, so nothing is left for the sweep that runs lost revisions.
    assert not RewindRelease.objects.filter(session__session_id=session.id).exists()


def test_a_revision_the_broker_did_not_take_is_run_by_the_sweep(
    user, chat, unreachable_broker, django_capture_on_commit_callbacks, caplog
):
    session, _, second = chat
    [_, rewound_event] = user_events(session.id)
    cat = memory_make(user=user, text="The user has a cat called Miso", sources=[rewound_event])

    with django_capture_on_commit_callbacks(execute=True):
        rewind(user, session, second)

    assert "session_rewound_memories_release" in caplog.text
    assert "the broker is unavailable" in caplog.text
    assert Memory.objects.filter(pk=cat.pk).exists()
    # Not yet: the task may still be on its way.
    assert rewind_releases_sweep.apply().get() == 0
    assert Memory.objects.filter(pk=cat.pk).exists()

    later = timezone.now() + timedelta(seconds=settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS + 1)
    assert services.rewind_releases_sweep(now=later) == 1

    assert not Memory.objects.filter(pk=cat.pk).exists()
    assert services.rewind_releases_sweep(now=later) == 0, "revised once, not again"


def test_a_rewind_made_while_a_revision_runs_keeps_its_record_for_the_next(user, chat, settings):
    session, _, second = chat
    [_, rewound_event] = user_events(session.id)
    memory_make(user=user, text="The user has a cat called Miso", sources=[rewound_event])
    rewind(user, session, second)  # its on_commit never runs here: the revision is not sent

    def another_rewind(sender, **kwargs):
        # Another edit of the chat lands while the revision deletes the memory.
        services.session_rewound_release_request(session_id=session_key(session))

    post_delete.connect(another_rewind, sender=Memory, dispatch_uid="test-another-rewind")
    try:
        session_rewound_memories_release(session_id=session_key(session))
    finally:
        post_delete.disconnect(dispatch_uid="test-another-rewind", sender=Memory)

    [record] = RewindRelease.objects.filter(session__session_id=session.id)
    assert record.rewinds == 2
    later = timezone.now() + timedelta(seconds=settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS + 1)
    assert services.rewind_releases_sweep(now=later) == 1
    assert not RewindRelease.objects.filter(session__session_id=session.id).exists()


def test_a_job_that_read_turns_a_rewind_then_took_out_keeps_none_of_their_facts(
    user, chat, monkeypatch, settings
):
    """The user edits a message while a memory job is extracting facts from it: the job's
    facts of the rewound turn do not stay, whichever commits first."""
    settings.MEMORY_TRIGGERS = {APP: {"every_n_turns": 0, "explicit": False}}
    session, _, second = chat
    job = services.memory_job_request(
        app_name=APP,
        user_pk=user.pk,
        session_id=session_key(session),
        trigger="session_end",
        enqueue=False,
    )
    extract = jobs.facts_extract

    def extract_while_the_user_edits(**kwargs):
        facts = extract(**kwargs)
        rewind(user, session, second)  # commits before the job writes what it extracted
        return facts

    monkeypatch.setattr(jobs, "facts_extract", extract_while_the_user_edits)
    services.memory_job_run(job_id=str(job.pk))
    background_wait_idle()

    texts = list(Memory.objects.filter(user=user).values_list("text", flat=True))
    assert any("Porto" in text for text in texts), texts
    assert not any("Miso" in text for text in texts), texts
    rewound = MemorySource.objects.filter(memory__user=user, event__rewound=True)
    assert not rewound.exists()


def test_a_rewind_landing_while_the_job_writes_is_revised_by_the_job(user, chat, monkeypatch):
    """The rewind lands after the job found its turns in the history but before its memories
    are stored, and the rewind's own revision has run already: the job revises them."""
    session, _, second = chat
    job = services.memory_job_request(
        app_name=APP,
        user_pk=user.pk,
        session_id=session_key(session),
        trigger="session_end",
        enqueue=False,
    )
    resolve = decisions._events_resolve

    def resolve_then_the_user_edits(**kwargs):
        found = resolve(**kwargs)
        rewind(user, session, second)
        session_rewound_memories_release(session_id=session_key(session))  # finds nothing yet
        return found

    monkeypatch.setattr(decisions, "_events_resolve", resolve_then_the_user_edits)
    services.memory_job_run(job_id=str(job.pk))

    texts = list(Memory.objects.filter(user=user).values_list("text", flat=True))
    assert any("Porto" in text for text in texts), texts
    assert not any("Miso" in text for text in texts), texts
    assert not MemorySource.objects.filter(memory__user=user, event__rewound=True).exists()


def test_turns_a_later_rewind_brings_back_are_remembered_again(user, chat):
    session, _, second = chat
    third = turn_add(session, "I work as a nurse")
    _, second_event, _ = user_events(session.id)
    cat = memory_make(user=user, text="The user has a cat called Miso", sources=[second_event])
    key = session_key(session)
    processed = EventRecord.objects.filter(session_id=key).count()
    MemoryWatermark.objects.create(session_id=key, last_sequence=processed)
    rewind(user, session, third)
    rewind(user, session, second)
    session_rewound_memories_release(session_id=key)
    assert not Memory.objects.filter(pk=cat.pk).exists()
    pending = generation.session_pending_memory(user_pk=user.pk, session_id=key)
    assert pending.turns == []

    rewind(user, session, third)

    pending = generation.session_pending_memory(user_pk=user.pk, session_id=key)
    assert pending.turns == ["I have a cat called Miso"]
    assert watermark_get(session_id=key) == second_event.sequence - 1
    assert session_rewound_memories_release(session_id=key).deleted == []
