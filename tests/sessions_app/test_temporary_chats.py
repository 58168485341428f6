"""Temporary chats are temporary: once left they are gone from search and the staff console
(reachable by their link only while kept), deleted after ``TEMPORARY_CHAT_RETENTION_DAYS``,
and in the person's export while they exist."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from chatapp.selectors import user_data_export
from sessions_app import services
from sessions_app.models import SessionRecord
from sessions_app.tasks import sessions_temporary_expire
from tests.factories import UserFactory
from tests.memory_app.support import session_make, turn_add

pytestmark = pytest.mark.django_db


def record(session) -> SessionRecord:
    return SessionRecord.objects.get(session_id=session.id)


def titled(user, title, *, temporary=False):
    session = session_make(user, temporary=temporary)
    services.session_rename(user_pk=user.pk, session_id=session.id, title=title)
    return session


def test_search_never_finds_a_temporary_chat(user):
    client = APIClient()
    client.force_login(user)
    titled(user, "Pancake recipe", temporary=True)
    kept = titled(user, "Pancake party")
    secret = titled(user, "Notes", temporary=True)
    turn_add(secret, "The pancake batter needs buttermilk.")
    turn_add(kept, "Pancakes for twelve on Sunday.")

    found = client.get("/api/search/", {"q": "pancake"}).json()["results"]

    assert [hit["session_id"] for hit in found] == [kept.id]


def test_the_staff_console_never_shows_a_temporary_chat(user):
    temporary = titled(user, "Private", temporary=True)
    kept = titled(user, "Plain")
    staff = UserFactory(is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_sessionrecord"))
    client = Client()
    client.force_login(staff)

    listing = client.get(reverse("admin:sessions_app_sessionrecord_changelist"))
    opened = client.get(
        reverse("admin:sessions_app_sessionrecord_change", args=[record(temporary).pk])
    )

    assert [row.pk for row in listing.context["cl"].result_list] == [record(kept).pk]
    assert opened.status_code == 302, "the console says there is no such chat"


def test_temporary_chats_are_deleted_after_their_retention(user, settings):
    settings.TEMPORARY_CHAT_RETENTION_DAYS = 30
    old, young = titled(user, "Old", temporary=True), titled(user, "Young", temporary=True)
    plain = titled(user, "Plain")
    month_ago = timezone.now() - timedelta(days=31)
    SessionRecord.objects.filter(session_id__in=[old.id, plain.id]).update(created_at=month_ago)

    assert sessions_temporary_expire.apply().get() == 1
    assert services.sessions_temporary_expire() == 0, "a second run finds nothing more"

    left = set(SessionRecord.objects.values_list("session_id", flat=True))
    assert left == {young.id, plain.id}
    settings.TEMPORARY_CHAT_RETENTION_DAYS = 0
    SessionRecord.objects.filter(session_id=young.id).update(created_at=month_ago)
    assert services.sessions_temporary_expire() == 0, "0 keeps them"


def test_the_export_holds_temporary_chats_while_they_exist(user):
    titled(user, "Scratch", temporary=True)

    exported = "".join(user_data_export(user=user))

    assert '"title":"Scratch","temporary":true' in exported.replace(" ", "")
