"""Linking a person's own account to an app's end user (issue 43): a superuser proposes in the
console, the person approves or declines on their Settings page; until they approve, the app's
keys reach nothing of theirs, and every step is in their access log."""

from __future__ import annotations

import pytest
from django.test import Client

from access_app.models import AuditAction, AuditLogEntry
from agents_app.models import App, EndUser, EndUserLinkProposal
from sessions_app.services import session_create
from tests.agents_app.test_service_api import Api, key_for
from tests.factories import StaffFactory, UserFactory

pytestmark = pytest.mark.django_db

ADD_PAGE = "/admin/agents_app/enduserlinkproposal/add/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def api() -> Api:
    return Api(key_for("helpdesk"), "helpdesk")


@pytest.fixture
def proposal(api, user) -> EndUserLinkProposal:
    superuser = UserFactory(is_staff=True, is_superuser=True)
    answer = signed_in(superuser).post(
        ADD_PAGE,
        {"app": App.objects.get(name="helpdesk").pk, "external_id": "ext-42", "user": user.pk},
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    return EndUserLinkProposal.objects.get(user=user)


def _their_sessions(api: Api) -> list[str]:
    answer = api.get("users/ext-42/sessions/")
    assert answer.status_code == 200
    return [session["id"] for session in answer.json()["sessions"]]


def test_a_proposal_links_nothing_until_the_person_approves_it(api, user, proposal):
    session_create(app_name="helpdesk", user_id=str(user.pk), session_id="private")

    before = _their_sessions(api)
    linked_before = EndUser.objects.filter(user=user).exists()
    page = signed_in(user).get("/settings/").content.decode()
    approved = signed_in(user).post(
        "/settings/", {"link_proposal": proposal.pk, "decision": "approve"}, follow=True
    )
    after = _their_sessions(api)

    assert before == [] and not linked_before
    assert "Apps asking to act for you" in page and "ext-42" in page
    assert "Approved: the app helpdesk may now act for you" in approved.content.decode()
    assert after == ["private"]
    assert EndUser.objects.get(user=user).external_id == "ext-42"
    actions = list(
        AuditLogEntry.objects.filter(subject_user=user)
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == [AuditAction.ADD, AuditAction.APPROVE, AuditAction.VIEW]
    log = signed_in(user).get("/access/").content.decode()
    assert "the app helpdesk acting for you as its user &#x27;ext-42&#x27;" in log


def test_a_declined_proposal_links_nothing_and_cannot_be_approved_after(api, user, proposal):
    session_create(app_name="helpdesk", user_id=str(user.pk), session_id="private")
    client = signed_in(user)

    declined = client.post("/settings/", {"link_proposal": proposal.pk, "decision": "decline"})
    again = client.post("/settings/", {"link_proposal": proposal.pk, "decision": "approve"})

    assert declined.status_code == 302 and again.status_code == 404
    assert not EndUser.objects.filter(user=user).exists()
    assert _their_sessions(api) == []
    proposal.refresh_from_db()
    assert proposal.status == EndUserLinkProposal.Status.DECLINED


def test_no_one_else_answers_a_persons_proposal(api, user, other_user, proposal):
    answer = signed_in(other_user).post(
        "/settings/", {"link_proposal": proposal.pk, "decision": "approve"}
    )

    assert answer.status_code == 404
    assert not EndUser.objects.exists()
    assert "ext-42" not in signed_in(other_user).get("/settings/").content.decode()


def test_only_a_superuser_proposes_and_never_for_a_staff_account(api, user):
    app = App.objects.get(name="helpdesk")
    staff = StaffFactory()
    superuser = UserFactory(is_staff=True, is_superuser=True)

    by_staff = signed_in(staff).post(ADD_PAGE, {"app": app.pk, "external_id": "x", "user": user.pk})
    for_staff = signed_in(superuser).post(
        ADD_PAGE, {"app": app.pk, "external_id": "x", "user": staff.pk}
    )

    assert by_staff.status_code == 403
    assert for_staff.status_code == 200
    assert "A staff account cannot be linked" in for_staff.content.decode()
    assert not EndUserLinkProposal.objects.exists()
