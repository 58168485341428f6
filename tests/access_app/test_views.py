"""The "Access to your data" page: grants given and revoked, errors shown, the audit log."""

import zoneinfo
from datetime import UTC, datetime, time, timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from access_app import services
from access_app.models import AccessGrant, PersonalAccessToken
from sessions_app.models import SessionRecord
from tests.factories import AccessGrantFactory, MemoryFactory, StaffFactory, session_key
from tests.memory_app.support import session_make

OVERVIEW = "access:overview"


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _until(days: int) -> str:
    return (timezone.localdate() + timedelta(days=days)).isoformat()


@pytest.mark.django_db
def test_anonymous_is_sent_to_sign_in(client):
    for url in (reverse(OVERVIEW), reverse("access:grant-create")):
        response = client.get(url) if url.endswith("access/") else client.post(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_page_says_nobody_has_access_yet(signed_in):
    response = signed_in.get(reverse(OVERVIEW))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Nobody has been given access to your data." in body
    assert "No staff member has looked at or changed your data." in body
    assert 'name="csrfmiddlewaretoken"' in body


@pytest.mark.django_db
def test_a_grant_ends_with_the_day_chosen_where_the_user_is_and_shows_that_day(
    signed_in, user, staff
):
    """Issue 17: "until 2026-11-30 (inclusive)" was shown as "until 2026-12-01 00:00 UTC"."""
    signed_in.cookies["tz"] = "America/New_York"
    day = timezone.localdate() + timedelta(days=6)

    response = signed_in.post(
        reverse("access:grant-create"),
        {"grantee": staff.username, "scope": "memories", "until": day.isoformat()},
        follow=True,
    )

    grant = AccessGrant.objects.get(owner=user)
    new_york = zoneinfo.ZoneInfo("America/New_York")
    assert grant.expires_at == datetime.combine(day + timedelta(days=1), time.min, new_york)
    body = response.content.decode()
    shown = f"{day:%-d %b %Y}"
    assert f"until {shown} (inclusive)." in body
    table = body[body.index('id="active-grants"') :]
    assert f"{shown}</time> (inclusive)" in table
    assert "UTC" not in table[: table.index("</table>")]
    assert f"{day + timedelta(days=1):%-d %b %Y}" not in table[: table.index("</table>")]


@pytest.mark.django_db
def test_the_readers_time_zone_ends_with_their_request(signed_in):
    """Dates read after a request (the next request's, a test's) are not in its reader's zone."""
    signed_in.cookies["tz"] = "Pacific/Kiritimati"

    assert signed_in.get(reverse(OVERVIEW)).status_code == 200

    assert timezone.get_current_timezone_name() == settings.TIME_ZONE


@pytest.mark.django_db
def test_an_unknown_time_zone_cookie_is_ignored(signed_in, user, staff):
    signed_in.cookies["tz"] = "Mars/Olympus_Mons"
    day = timezone.localdate() + timedelta(days=3)

    signed_in.post(
        reverse("access:grant-create"),
        {"grantee": staff.username, "scope": "memories", "until": day.isoformat()},
    )

    grant = AccessGrant.objects.get(owner=user)
    assert grant.expires_at == datetime.combine(day + timedelta(days=1), time.min, UTC)


@pytest.mark.django_db
def test_grant_then_revoke_through_the_page(signed_in, user, staff):
    response = signed_in.post(
        reverse("access:grant-create"),
        {"grantee": staff.username, "scope": "memories", "until": _until(6)},
        follow=True,
    )
    body = response.content.decode()
    assert f"{staff.username} may read my memories and where they came from until" in body
    grant = AccessGrant.objects.get(owner=user)
    assert grant.grantee == staff
    end = timezone.localtime(grant.expires_at)
    assert (end.date(), end.hour, end.minute) == (timezone.localdate() + timedelta(days=7), 0, 0)
    assert 'id="active-grants"' in body

    response = signed_in.post(reverse("access:grant-revoke", args=[grant.pk]), follow=True)
    body = response.content.decode()
    assert f"{staff.username} no longer has access." in body
    assert "Nobody has been given access to your data." in body
    assert "Ended grants (1)" in body
    grant.refresh_from_db()
    assert grant.revoked_at is not None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"grantee": "nobody-here", "scope": "memories", "until": "+3"}, "No account has this"),
        ({"grantee": "", "scope": "memories", "until": "+3"}, "This field is required."),
        ({"grantee": "STAFF", "scope": "memories", "until": "-1"}, "must lie in the future"),
        ({"grantee": "STAFF", "scope": "memories", "until": "+90"}, "at most 90 days"),
        ({"grantee": "STAFF", "scope": "memories", "until": "9999-12-31"}, "at most 90 days"),
        ({"grantee": "STAFF", "scope": "memories", "until": "0001-01-01"}, "in the future"),
        ({"grantee": "STAFF", "scope": "memories", "until": "soon"}, "Enter a valid date."),
        ({"grantee": "STAFF", "scope": "all", "until": "+3"}, "Select a valid choice."),
    ],
)
def test_bad_grants_show_the_form_again_with_the_error(signed_in, staff, form, message):
    data = dict(form)
    if data["grantee"] == "STAFF":
        data["grantee"] = staff.username
    if data["until"][0] in "+-":
        data["until"] = _until(int(data["until"]))
    response = signed_in.post(reverse("access:grant-create"), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not AccessGrant.objects.exists()


@pytest.mark.django_db
def test_revoking_another_users_grant_is_not_found_and_changes_nothing(signed_in, other_user):
    grant = AccessGrantFactory(owner=other_user)
    response = signed_in.post(reverse("access:grant-revoke", args=[grant.pk]))
    assert response.status_code == 404
    assert grant.grantee.username not in response.content.decode()
    grant.refresh_from_db()
    assert grant.revoked_at is None


@pytest.mark.django_db
def test_revoke_needs_post(signed_in, user):
    grant = AccessGrantFactory(owner=user)
    assert signed_in.get(reverse("access:grant-revoke", args=[grant.pk])).status_code == 405


@pytest.mark.django_db
def test_page_shows_only_my_grants_and_my_audit_log(signed_in, user, other_user):
    mine = AccessGrantFactory(owner=user, grantee=StaffFactory(username="support-mine"))
    AccessGrantFactory(owner=other_user, grantee=StaffFactory(username="support-theirs"))
    services.audit_record(
        actor=mine.grantee,
        subject_user_pk=user.pk,
        action="view",
        object_type="memory_app.memory",
        object_id="1234",
        reason="ticket 77: wrong reminder",
    )
    services.audit_record(
        actor=mine.grantee,
        subject_user_pk=other_user.pk,
        action="delete",
        object_type="memory_app.memory",
        object_id="9999",
        reason="someone else's ticket",
    )
    body = signed_in.get(reverse(OVERVIEW)).content.decode()
    assert "support-mine" in body
    assert "support-theirs" not in body
    assert "Viewed a memory since deleted" in body
    assert "ticket 77: wrong reminder" in body
    assert "9999" not in body
    assert "someone else&#x27;s ticket" not in body


@pytest.mark.django_db
def test_staff_see_the_access_they_hold(client, user):
    grant = AccessGrantFactory(owner=user)
    client.force_login(grant.grantee)
    body = client.get(reverse(OVERVIEW)).content.decode()
    assert 'id="held-grants"' in body
    assert user.username in body


@pytest.mark.django_db
def test_an_expired_grant_is_listed_as_ended(signed_in, user, expired_staff):
    body = signed_in.get(reverse(OVERVIEW)).content.decode()
    assert "Nobody has been given access to your data." in body
    assert "Ended grants (1)" in body
    assert "expired" in body


@pytest.mark.django_db
def test_audit_log_names_what_was_seen_and_links_conversations(signed_in, user, other_user):
    staff = StaffFactory()
    memory = MemoryFactory(user=user, text="Prefers window seats")
    theirs = MemoryFactory(user=other_user, text="Their private fact")
    session = session_make(user)
    SessionRecord.objects.filter(session_id=session.id).update(title="Lisbon trip")
    for object_type, object_id in [
        ("memory_app.memory", memory.pk),
        ("memory_app.memory", theirs.pk),
        ("sessions_app.sessionrecord", session_key(session)),
        ("memory_app.memory", ""),
    ]:
        services.audit_record(
            actor=staff,
            subject_user_pk=user.pk,
            action="view",
            object_type=object_type,
            object_id=object_id,
        )
    body = signed_in.get(reverse(OVERVIEW)).content.decode()
    assert "Viewed the memory “Prefers window seats”" in body
    assert "Their private fact" not in body
    assert "Viewed a memory since deleted" in body
    chat_url = reverse("chat-session", kwargs={"session_id": session.id}) + "?app_name=chat"
    assert f'<a href="{chat_url}">the conversation “Lisbon trip”</a>' in body
    assert "Viewed a list of memories" in body


@pytest.mark.django_db
def test_a_token_made_on_settings_is_shown_once_listed_and_revoked(signed_in, user, other_user):
    made = signed_in.post(
        reverse("access:token-create"), {"name": "Claude Desktop", "write": "on", "expires": "30"}
    )

    assert made.status_code == 201
    secret = made.context["token"]
    record = PersonalAccessToken.objects.get(user=user)
    assert record.name == "Claude Desktop" and record.can_write
    assert secret.partition(".")[2] not in record.hashed_key
    settings_page = signed_in.get(reverse("settings")).content.decode()
    assert "Claude Desktop" in settings_page and record.prefix in settings_page
    assert secret not in settings_page
    assert f'href="/access/tokens/{record.pk}/revoke/"' in settings_page
    other = services.access_token_create(user=other_user, name="theirs", scopes=["read"]).record
    assert signed_in.get(reverse("access:token-revoke", args=[other.pk])).status_code == 404
    assert signed_in.post(reverse("access:token-revoke", args=[other.pk])).status_code == 404
    asked = signed_in.get(reverse("access:token-revoke", args=[record.pk])).content.decode()
    assert "Revoke this token?" in asked and "Claude Desktop" in asked
    record.refresh_from_db()
    assert not record.revoked
    revoked = signed_in.post(reverse("access:token-revoke", args=[record.pk]), follow=True)
    assert "revoked" in revoked.content.decode()
    record.refresh_from_db()
    other.refresh_from_db()
    assert record.revoked and not other.revoked
    again = signed_in.get(reverse("access:token-revoke", args=[record.pk])).content.decode()
    assert "This token is revoked" in again and "Revoke token" not in again


@pytest.mark.django_db
def test_a_token_without_a_name_is_refused_and_nothing_is_made(signed_in, user):
    response = signed_in.post(
        reverse("access:token-create"), {"name": " ", "expires": ""}, follow=True
    )

    assert "This field is required." in response.content.decode()
    assert not PersonalAccessToken.objects.filter(user=user).exists()
