"""Time to live (issue 13, item 7): topic and app defaults, time-bound facts that carry their
own expiry from extraction, and the user and staff setting or clearing one."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from access_app.models import AuditAction, AuditLogEntry
from memory_app import selectors, services
from memory_app.models import GenerationJob, Memory, MemoryRevision, MemoryTopic
from memory_app.services.jobs import memory_job_request, memory_job_run
from tests.factories import session_key
from tests.memory_app import test_admin
from tests.memory_app.support import (
    APP,
    lexical_only,  # noqa: F401 (fixture)
    memory_make,
    session_make,
    turn_add,
)
from tests.memory_app.test_admin import act, client_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only")]
memory_admin = test_admin.memory_admin  # the console's fixture, a memory admin


def generate(user, *texts):
    session = session_make(user)
    for text in texts:
        turn_add(session, text)
    job = memory_job_request(
        app_name=APP,
        user_pk=user.pk,
        session_id=session_key(session),
        trigger=GenerationJob.Trigger.SESSION_END,
        enqueue=False,
    )
    memory_job_run(job_id=str(job.id))
    return {m.text: m for m in Memory.objects.filter(user=user)}


def days_left(memory):
    return round((memory.expires_at - timezone.now()).total_seconds() / 86400)


def test_a_time_bound_fact_carries_its_own_expiry_and_a_lasting_one_none(user):
    memories = generate(user, "I am in Berlin this week.", "I live in Lisbon.")

    assert days_left(memories["The user is in Berlin this week."]) == 7
    assert memories["The user lives in Lisbon."].expires_at is None


def test_the_topic_ttl_comes_before_the_app_default(user, settings):
    settings.MEMORY_APP_TTL_DAYS = {APP: 90}
    MemoryTopic.objects.create(
        app_name=APP, key="preferences", label="", description="", managed=True, ttl_days=10
    )

    memories = generate(user, "I like green tea.", "I live in Lisbon.")

    assert days_left(memories["The user likes green tea."]) == 10
    assert days_left(memories["The user lives in Lisbon."]) == 90


def test_an_expired_memory_is_not_found_and_then_forgotten(user):
    memory = memory_make(user=user, text="The user is in Berlin this week.")
    services.memory_expiry_set(
        app_name=APP,
        user_pk=user.pk,
        memory_id=str(memory.id),
        expires_at=timezone.now() - timedelta(seconds=1),
    )

    assert selectors.memory_search(app_name=APP, user_pk=user.pk, query="Berlin") == []
    assert services.memories_forget().expired == 1
    assert not Memory.objects.filter(pk=memory.pk).exists()


@pytest.fixture
def signed_in(client, user, settings):
    settings.DEFAULT_APP_NAME = APP
    client.force_login(user)
    return client


def test_the_user_sets_and_clears_a_date_on_the_memory_page(signed_in, user, other_user):
    memory = memory_make(user=user, text="The user has a dentist appointment.")
    theirs = memory_make(user=other_user, text="The user likes tea.")
    url = reverse("memory-expiry", args=[memory.id])

    signed_in.post(url, {"forget_on": "2099-05-01"})
    memory.refresh_from_db()
    assert memory.expires_at.date().isoformat() == "2099-05-01"
    page = signed_in.get(reverse("memory")).content.decode()
    assert "forgotten after 1 May 2099" in page

    signed_in.post(url, {"keep": "1", "forget_on": ""})
    memory.refresh_from_db()
    assert memory.expires_at is None
    actions = list(memory.revisions.values_list("action", flat=True))
    assert actions == [MemoryRevision.Action.EXPIRY_CHANGED] * 2

    assert signed_in.post(url, {"forget_on": "2001-01-01"}).status_code == 302
    memory.refresh_from_db()
    assert memory.expires_at is None, "a date in the past is refused"
    other = reverse("memory-expiry", args=[theirs.id])
    assert signed_in.post(other, {"forget_on": "2099-05-01"}).status_code == 404


def test_staff_set_and_clear_an_expiry_with_a_reason_in_the_audit_log(memory_admin, user):
    memory = memory_make(user=user, text="The user is in Berlin this week.")
    client = client_for(memory_admin)

    act(client, "expire_in_30_days", memory, reason="time-bound")
    memory.refresh_from_db()
    assert days_left(memory) == 30
    act(client, "clear_expiry", memory, reason="")
    memory.refresh_from_db()
    assert memory.expires_at is None

    revision = memory.revisions.filter(action=MemoryRevision.Action.EXPIRY_CHANGED).first()
    assert (revision.actor_user, revision.reason) == (memory_admin, "time-bound")
    entries = AuditLogEntry.objects.filter(actor=memory_admin, action=AuditAction.CHANGE)
    assert entries.count() == 2
