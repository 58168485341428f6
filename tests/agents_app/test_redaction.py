"""An app's PII redaction wherever something is stored: the chat's title (the one made from the
first message comes through the same rename), a session's initial state, attachment and
artifact names, the app's own memories; and the person's Settings page saying what each app
redacts. With redaction off, everything is kept as written."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from agents_app.models import App
from agents_app.redaction import filename_redact
from agents_app.services import app_ensure, service_account_create
from memory_app.models import Memory
from sessions_app import services
from sessions_app.models import ArtifactRecord, SessionRecord, SessionState, UserState
from tests.sample_files import image_bytes

pytestmark = pytest.mark.django_db

FIRST_MESSAGE = "mail me at ada@lovelace.example or call +44 20 7946 0958"
REDACTED = "mail me at [email] or call [phone]"


@pytest.fixture
def redacting_chat():
    App.objects.filter(name="chat").update(pii_redaction=True)


def _session(api_client, **body) -> dict:
    answer = api_client.post(
        "/api/sessions/", json.dumps({"app_name": "chat", **body}), content_type="application/json"
    )
    assert answer.status_code == 201, answer.content
    return answer.json()


def _rename(api_client, session_id: str, title: str):
    return api_client.patch(
        f"/api/sessions/{session_id}/?app_name=chat",
        json.dumps({"title": title}),
        content_type="application/json",
    )


def test_the_title_made_from_the_first_message_is_stored_shown_and_searched_redacted(
    api_client, redacting_chat
):
    session = _session(api_client)

    renamed = _rename(api_client, session["id"], FIRST_MESSAGE)

    assert renamed.status_code == 200
    assert renamed.json()["title"] == REDACTED
    assert SessionRecord.objects.get().title == REDACTED
    listed = api_client.get("/api/sessions/", {"app_name": "chat"}).json()["results"]
    assert [each["title"] for each in listed] == [REDACTED]
    assert api_client.get("/api/search/", {"q": "lovelace", "app_name": "chat"}).json() == {
        "results": []
    }
    found = api_client.get("/api/search/", {"q": "mail", "app_name": "chat"}).json()
    assert [hit["title"] for hit in found["results"]] == [REDACTED]


def test_a_title_is_kept_as_written_where_redaction_is_off(api_client):
    session = _session(api_client)

    _rename(api_client, session["id"], FIRST_MESSAGE)

    assert SessionRecord.objects.get().title == " ".join(FIRST_MESSAGE.split())


def test_a_title_too_long_before_redaction_is_refused_and_one_longer_after_fits_the_column(
    api_client, redacting_chat
):
    session = _session(api_client)
    assert _rename(api_client, session["id"], "x" * 201).status_code == 400

    # "a@b.co" is six characters and "[email]" seven: the stored title is cut to 200.
    assert _rename(api_client, session["id"], "y" * 193 + " a@b.co").status_code == 200
    assert SessionRecord.objects.get().title == "y" * 193 + " [email"


def test_initial_state_is_redacted_in_every_scope_it_reaches(api_client, user, redacting_chat):
    _session(
        api_client,
        state={
            "contact": {"email": "ada@lovelace.example", "tags": ["call 555-123-4567", 3]},
            "user:card": "4111 1111 1111 1111",
        },
    )

    assert SessionState.objects.get().value == {
        "email": "[email]",
        "tags": ["call [phone]", 3],
    }
    assert UserState.objects.get(key="card").value == "[card]"


class ServiceApi:
    """The app ``support``, redacting, through a service account's key."""

    def __init__(self) -> None:
        app, _ = app_ensure(name="support")
        App.objects.filter(pk=app.pk).update(pii_redaction=True)
        key = service_account_create(app=app, name="agent").key
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
        self.base = "/api/v1/apps/support/"

    def post(self, path: str, body: dict):
        return self.client.post(self.base + path, json.dumps(body), content_type="application/json")


def test_a_service_accounts_session_state_and_app_memory_are_redacted():
    api = ServiceApi()

    api.post("users/alice/sessions/", {"session_id": "s1", "state": {"phone": "555-123-4567"}})
    added = api.post("memories/", {"text": "Escalations go to boss@support.example."})

    assert SessionState.objects.get().value == "[phone]"
    assert added.status_code == 201, added.content
    memory = Memory.objects.get(pk=added.json()["id"])
    assert memory.text == "Escalations go to [email]."
    assert memory.revisions.get().after["text"] == "Escalations go to [email]."
    corrected = api.client.patch(
        f"{api.base}memories/{memory.pk}/",
        json.dumps({"text": "Escalations go to +1 (555) 123-4567."}),
        content_type="application/json",
    )
    assert corrected.status_code == 200, corrected.content
    memory.refresh_from_db()
    assert memory.text == "Escalations go to [phone]."


def test_an_artifact_saved_under_a_name_with_an_email_is_stored_redacted_and_found_by_it():
    api = ServiceApi()
    api.post("users/alice/sessions/", {"session_id": "s1"})
    files = f"{api.base}users/alice/sessions/s1/artifacts/"
    upload = SimpleUploadedFile("artifact", b"notes", content_type="text/plain")

    saved = api.client.post(
        files, {"filename": "ada@lovelace.example.txt", "file": upload, "text": True}
    )

    assert saved.status_code == 201, saved.content
    assert ArtifactRecord.objects.get().filename == "[email].txt"
    assert api.client.get(files).json() == {"filenames": ["[email].txt"]}
    loaded = api.client.get(files + "ada@lovelace.example.txt/versions/latest/")
    assert loaded.status_code == 200
    assert loaded.json()["part"] == {"text": "notes"}


def test_a_chat_attachments_name_is_redacted(api_client, user, redacting_chat):
    session = services.session_create(app_name="chat", user_id=str(user.pk))

    answer = api_client.post(
        f"/api/sessions/{session.id}/artifacts/",
        {"file": SimpleUploadedFile("scan for 555-123-4567.png", image_bytes("PNG"))},
        format="multipart",
    )

    assert answer.status_code == 201, answer.content
    assert [each["filename"] for each in answer.json()] == ["scan for [phone].png"]
    assert ArtifactRecord.objects.get().filename == "scan for [phone].png"


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("user:ada@lovelace.example.pdf", "user:[email].pdf"),
        ("ada@lovelace.example", "[email].example"),
        ("report.txt", "report.txt"),
        ("user:plan", "user:plan"),
    ],
)
def test_a_file_name_keeps_its_owner_prefix_and_extension(name, stored):
    assert filename_redact(name) == stored


def test_settings_say_what_each_app_redacts(client, user):
    App.objects.create(name="support", title="Support desk", pii_redaction=True)
    client.force_login(user)

    page = client.get("/settings/").content.decode()

    assert (
        "“Support desk” replaces e-mail addresses, phone and card numbers and national ids" in page
    )
    assert "“chat” keeps what you write as you write it: it replaces no personal details." in page
