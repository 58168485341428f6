"""Sessions in the staff console: read-only, events shown as the conversation, hostile text
inert, and closed to staff without the permission."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from google.genai import types

from access_app.models import AuditLogEntry
from access_app.services import ADMINS_GROUP
from memory_app.models import GenerationJob
from memory_app.services import jobs
from sessions_app import services as session_services
from sessions_app.events import (
    ATTACHMENTS_KEY,
    TIMESTAMP_MAX,
    TIMESTAMP_MIN,
    Event,
    new_invocation_id,
)
from sessions_app.models import EventRecord, SessionRecord
from tests.factories import AccessGrantFactory, UserFactory
from tests.memory_app.support import session_make, turn_add

HOSTILE = 'Hi <script>alert("x")</script> <img src=x onerror=alert(1)> **bold**'


def staff_client(*codenames: str) -> Client:
    member = UserFactory(is_staff=True)
    member.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(member)
    return client


@pytest.fixture
def session(user):
    session = session_make(user)
    turn_add(session, HOSTILE, reply="A *reply* with [a link](javascript:alert(1)).")
    invocation_id = new_invocation_id()
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id=invocation_id,
            author="assistant",
            content=types.Content(
                role="model",
                parts=[
                    types.Part(
                        function_call=types.FunctionCall(
                            name="load_memory", args={"query": "<b>trip</b>"}
                        )
                    )
                ],
            ),
        ),
    )
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id=invocation_id,
            author="assistant",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            name="load_memory", response={"memories": ["Lisbon in May"]}
                        )
                    )
                ],
            ),
        ),
    )
    return SessionRecord.objects.get(session_id=session.id)


def page_of(client: Client, session: SessionRecord):
    return client.get(reverse("admin:sessions_app_sessionrecord_change", args=[session.pk]))


def test_conversation_is_shown_in_order_with_anchors_per_event(session):
    client = staff_client("view_sessionrecord")
    response = page_of(client, session)
    page = response.content.decode()

    assert response.status_code == 200
    events = list(EventRecord.objects.filter(session=session).order_by("sequence"))
    positions = [page.index(f'id="event-{event.event_id}"') for event in events]
    assert positions == sorted(positions) and len(events) == 4
    assert "<strong>bold</strong>" in page
    assert "<em>reply</em>" in page
    assert "<summary>Called load_memory</summary>" in page
    assert escape('"query": "<b>trip</b>"') in page
    assert "<summary>Result of load_memory</summary>" in page
    assert escape('"Lisbon in May"') in page
    viewer = response.wsgi_request.user
    [entry] = AuditLogEntry.objects.filter(actor=viewer)
    assert (entry.subject_user_id, entry.action, entry.object_id) == (
        session.user_id,
        "view",
        session.pk,
    )


def speakers(page: str) -> list[str]:
    return re.findall(r'<span class="role">([^<]*)</span>', page)


def test_each_event_is_labelled_with_who_it_is_from(session):
    """Issue 17: a tool's result (a "user" content the agent stored) read "User (assistant)"."""
    page = page_of(staff_client("view_sessionrecord"), session).content.decode()

    assert speakers(page) == ["User", "Assistant", "Assistant", "Tool result"]
    assert "User (assistant)" not in page


def test_tool_steps_read_as_the_chat_shows_them_with_their_json_on_demand(user):
    session = session_make(user)
    invocation_id = new_invocation_id()
    call = types.FunctionCall(
        id="call-1", name="set_state", args={"key": "user:name", "value": "Dana"}
    )
    for role, part, step in (
        ("model", types.Part(function_call=call), "Saving your name"),
        (
            "user",
            types.Part(
                function_response=types.FunctionResponse(
                    id="call-1", name="set_state", response={"status": "ok", "key": "user:name"}
                )
            ),
            "Saved your name",
        ),
    ):
        session_services.event_append(
            session=session,
            event=Event(
                invocation_id=invocation_id,
                author="support_bot",
                content=types.Content(role=role, parts=[part]),
                custom_metadata={"tool_steps": {"call-1": step}},
            ),
        )

    page = page_of(
        staff_client("view_sessionrecord"), SessionRecord.objects.get(session_id=session.id)
    )
    html = page.content.decode()

    assert speakers(html) == ["Assistant (support_bot)", "Tool result"]
    assert re.findall(r"<summary>([^<]*)</summary>", html) == [
        "Saving your name",
        "Saved your name",
    ]
    assert escape('"value": "Dana"') in html


def test_hostile_text_is_shown_escaped_never_as_markup(session):
    page = page_of(staff_client("view_sessionrecord"), session).content.decode()
    conversation = page[page.index('class="conversation"') :]

    assert "<script>" not in conversation
    assert '&lt;script&gt;alert("x")&lt;/script&gt;' in conversation
    assert "&lt;img src=x onerror=alert(1)&gt;" in conversation
    assert "<img" not in conversation
    assert 'href="javascript:' not in conversation


def test_sessions_are_read_only(session):
    client = staff_client("view_sessionrecord", "change_sessionrecord", "delete_sessionrecord")
    url = reverse("admin:sessions_app_sessionrecord_change", args=[session.pk])

    client.post(url, {"title": "renamed"})
    deleted = client.post(
        reverse("admin:sessions_app_sessionrecord_delete", args=[session.pk]), {"post": "yes"}
    )

    assert deleted.status_code == 403
    assert SessionRecord.objects.get(pk=session.pk).title == session.title


def test_staff_without_the_permission_cannot_read_conversations(session):
    client = staff_client("view_memory")

    assert page_of(client, session).status_code == 403
    assert client.get(reverse("admin:sessions_app_sessionrecord_changelist")).status_code == 403


def test_a_conversations_grant_opens_that_users_sessions_only(session, other_user):
    others = session_make(other_user)
    turn_add(others, "Someone else's secret plans.")
    grant = AccessGrantFactory(owner=session.user, scope="conversations")
    client = Client()
    client.force_login(grant.grantee)

    listing = client.get(reverse("admin:sessions_app_sessionrecord_changelist"))
    other_page = client.get(reverse("admin:sessions_app_sessionrecord_change", args=[others.id]))

    assert [row.pk for row in listing.context["cl"].result_list] == [session.pk]
    assert page_of(client, session).status_code == 200
    assert other_page.status_code == 302
    assert "secret plans" not in client.get(other_page.url).content.decode()


def test_a_memories_grant_does_not_open_conversations(session):
    grant = AccessGrantFactory(owner=session.user, scope="memories")
    client = Client()
    client.force_login(grant.grantee)

    assert page_of(client, session).status_code in (302, 403)
    assert (
        "bold"
        not in client.get(
            reverse("admin:sessions_app_sessionrecord_change", args=[session.pk]), follow=True
        ).content.decode()
    )


def test_list_shows_sessions_with_event_counts(session):
    response = staff_client("view_sessionrecord").get(
        reverse("admin:sessions_app_sessionrecord_changelist")
    )

    [listed] = response.context["cl"].result_list
    assert listed.pk == session.pk and listed.events_stored == 4


def test_a_session_id_the_admin_must_quote_opens_and_its_history_is_audited(user):
    session = session_services.session_create(
        app_name="chat", user_id=str(user.pk), session_id="trip_plans:2026"
    )
    turn_add(session, "Pack the **sunscreen**.")
    key = SessionRecord.objects.get(session_id=session.id).pk
    client = staff_client("view_sessionrecord")
    change = reverse("admin:sessions_app_sessionrecord_change", args=[quote(key)])
    history = reverse("admin:sessions_app_sessionrecord_history", args=[quote(key)])

    page = client.get(change)
    assert client.get(history).status_code == 200

    assert page.status_code == 200 and "<strong>sunscreen</strong>" in page.content.decode()
    assert list(
        AuditLogEntry.objects.filter(subject_user=user).values_list("object_id", "path")
    ) == [(key, history), (key, change)]


def test_memory_admins_rerun_generation_from_the_session_list(session, monkeypatch):

    sent = []
    monkeypatch.setattr(jobs, "task_enqueue", lambda *, task, **kwargs: sent.append(kwargs))
    member = UserFactory(is_staff=True)
    member.groups.add(Group.objects.get(name=ADMINS_GROUP))
    client = Client()
    client.force_login(member)
    data = {"action": "regenerate_memories", "_selected_action": [session.pk]}
    changelist = reverse("admin:sessions_app_sessionrecord_changelist")

    asked = client.post(changelist, data)
    client.post(changelist, {**data, "confirm": "yes", "reason": "topics changed"})

    assert 'name="reason"' in asked.content.decode()
    job = GenerationJob.objects.get(session_id=session.pk)
    assert (job.trigger, job.status) == ("manual", "queued")
    assert sent == [{"job_id": str(job.pk)}]
    entry = AuditLogEntry.objects.get(actor=member, action="rerun")
    assert (entry.subject_user_id, entry.reason) == (session.user_id, "topics changed")


@pytest.mark.parametrize("timestamp", [TIMESTAMP_MIN, TIMESTAMP_MAX])
def test_events_at_the_ends_of_the_accepted_time_range_are_shown(user, timestamp):
    """The API refuses timestamps past years 1-9999; the ends of that range still render, in
    the conversation and in the session list."""
    session = session_make(user)
    session_services.event_append(
        session=session,
        event=Event(invocation_id=new_invocation_id(), author="user", timestamp=timestamp),
    )
    client = staff_client("view_sessionrecord")

    page = page_of(client, SessionRecord.objects.get(session_id=session.id))
    listing = client.get(reverse("admin:sessions_app_sessionrecord_changelist"))

    assert page.status_code == 200
    assert listing.status_code == 200


def test_an_attached_files_size_is_shown_as_a_person_reads_it(user):
    session = session_make(user)
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id=new_invocation_id(),
            author="user",
            content=types.Content(role="user", parts=[types.Part(text="see the scan")]),
            custom_metadata={
                ATTACHMENTS_KEY: [
                    {
                        "id": "6f1d1c1e-0000-4000-8000-000000000001",
                        "filename": "scan.png",
                        "mime_type": "image/png",
                        "size": 31_457_280,
                    }
                ]
            },
        ),
    )
    record = SessionRecord.objects.get(session_id=session.id)

    page = page_of(staff_client("view_sessionrecord"), record).content.decode()

    assert "scan.png (image/png, 30 MB)" in page
