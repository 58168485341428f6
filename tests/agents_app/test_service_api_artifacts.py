"""An app's agent's files through the service API: ADK's artifacts of any type, kept byte for
byte, and the same files the chat shows (only images shown in the browser)."""

from __future__ import annotations

import base64
import io
import json
from urllib.parse import quote

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from PIL import Image

from agents_app.models import EndUser
from agents_app.services import app_ensure, end_user_ensure, service_account_create
from sessions_app import selectors, services
from sessions_app.models import ArtifactRecord

pytestmark = pytest.mark.django_db

APP = "support"


def png(size: tuple[int, int] = (3, 2)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "teal").save(out, format="PNG")
    return out.getvalue()


def stored_files(folder) -> list:
    return sorted(path for path in folder.rglob("*") if path.is_file())


class Api:
    def __init__(self) -> None:
        app, _ = app_ensure(name=APP)
        key = service_account_create(app=app, name="agent").key
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
        self.base = f"/api/v1/apps/{APP}/users/"

    def files(self, user: str, session: str | None = None) -> str:
        return self.base + user + (f"/sessions/{session}" if session else "") + "/artifacts/"

    def save(
        self,
        user: str,
        filename: str,
        data: bytes,
        mime_type: str | None,
        *,
        session: str | None = None,
        **fields,
    ):
        upload = SimpleUploadedFile("artifact", data, content_type=mime_type or "text/plain")
        body = {"filename": filename, "file": upload, "text": mime_type is None, **fields}
        return self.client.post(self.files(user, session), body)


@pytest.fixture
def api() -> Api:
    return Api()


@pytest.fixture
def chat(api):
    """End user ``ada`` of the app and a session of theirs."""
    end_user = end_user_ensure(app=app_ensure(name=APP)[0], external_id="ada")
    session = services.session_create(app_name=APP, user_id=str(end_user.user_id))
    return end_user, session.id


def test_versions_are_saved_listed_and_loaded_as_the_chat_keeps_them(api, chat):
    _, session = chat
    first, second = png((1, 1)), png((4, 4))

    saved = [
        api.save("ada", "chart.png", data, "image/png", session=session, custom_metadata='{"n": 1}')
        for data in (first, second)
    ]

    assert [answer.status_code for answer in saved] == [201, 201]
    assert [answer.json()["version"] for answer in saved] == [0, 1]
    assert saved[0].json()["canonical_uri"].startswith(f"artifact://apps/{APP}/users/")
    versions = api.client.get(api.files("ada", session) + "chart.png/").json()["versions"]
    assert [(each["version"], each["mime_type"], each["size"]) for each in versions] == [
        (0, "image/png", len(first)),
        (1, "image/png", len(second)),
    ]
    assert versions[0]["custom_metadata"] == {"n": 1}
    chat_rows = ArtifactRecord.objects.filter(session__session_id=session).order_by("version")
    assert [str(row.pk) for row in chat_rows] == [each["id"] for each in versions]
    oldest = api.client.get(api.files("ada", session) + "chart.png/versions/0/").json()
    assert oldest["part"]["inline_data"] == {
        "mime_type": "image/png",
        "data": base64.b64encode(first).decode(),
    }
    latest = api.client.get(api.files("ada", session) + "chart.png/versions/latest/").json()
    assert latest["version"] == 1
    assert api.client.get(api.files("ada", session) + "chart.png/versions/2/").status_code == 404
    assert api.client.get(api.files("ada", session) + "chart.png/versions/x/").status_code == 404


def test_a_text_part_comes_back_as_text(api, chat):
    _, session = chat
    assert api.save("ada", "notes.md", b"# Plan", None, session=session).status_code == 201

    loaded = api.client.get(api.files("ada", session) + "notes.md/versions/latest/").json()

    assert loaded["part"] == {"text": "# Plan"}
    assert loaded["mime_type"] == "text/plain"


def test_user_files_belong_to_the_end_user_and_every_session_lists_them(api, chat):
    _, session = chat
    assert api.save("ada", "user:avatar.png", png(), "image/png").status_code == 201
    assert api.save("ada", "draft.txt", b"one", None, session=session).status_code == 201

    assert api.client.get(api.files("ada", session)).json() == {
        "filenames": ["draft.txt", "user:avatar.png"]
    }
    assert api.client.get(api.files("ada")).json() == {"filenames": ["user:avatar.png"]}
    refused = api.save("ada", "draft.txt", b"two", None)
    assert refused.status_code == 400
    assert "Session ID must be provided" in refused.json()["detail"]
    assert api.save("bea", "user:avatar.png", png(), "image/png").status_code == 201
    assert EndUser.objects.filter(app__name=APP, external_id="bea").exists()
    assert api.client.get(api.files("bea")).json() == {"filenames": ["user:avatar.png"]}


ANY_TYPE = [
    ("data.json", b'{"rows": [1, 2]}', "application/json"),
    ("table.csv", b"a,b\n1,2\n", "text/csv"),
    ("voice.ogg", bytes(range(256)) * 40, "audio/ogg"),
    ("blob.bin", b"\x00\xff" * 500, "application/octet-stream"),
    ("page.html", b"<html><script>alert(1)</script>", "text/html"),
    ("fake.png", b"not an image", "image/png"),
    ("drawing.svg", b"<svg onload='alert(1)'/>", "image/svg+xml"),
    ("empty.txt", b"", "text/plain"),
]


@pytest.mark.parametrize(("filename", "data", "mime_type"), ANY_TYPE)
def test_a_file_of_any_type_is_kept_byte_for_byte_with_its_type(
    api, chat, filename, data, mime_type
):
    _, session = chat

    saved = api.save("ada", filename, data, mime_type, session=session)

    assert saved.status_code == 201, saved.content
    assert saved.json()["mime_type"] == mime_type and saved.json()["size"] == len(data)
    loaded = api.client.get(api.files("ada", session) + f"{filename}/versions/0/").json()
    assert loaded["part"] == {
        "inline_data": {"mime_type": mime_type, "data": base64.b64encode(data).decode()}
    }


@pytest.mark.parametrize(("filename", "data", "mime_type"), ANY_TYPE)
def test_in_the_browser_only_images_show_and_every_other_file_is_downloaded(
    api, chat, filename, data, mime_type
):
    end_user, session = chat
    saved = api.save("ada", filename, data, mime_type, session=session).json()
    owner = Client()
    owner.force_login(end_user.user)

    served = owner.get(f"/api/artifacts/{saved['id']}/content/")

    assert served.status_code == 200
    assert b"".join(served.streaming_content) == data
    assert served["X-Content-Type-Options"] == "nosniff"
    assert served["Content-Type"].split(";")[0] == mime_type
    disposition = served["Content-Disposition"]
    if mime_type == "image/png":
        assert disposition.startswith("inline")
    else:
        assert disposition.startswith("attachment"), disposition


def test_an_image_that_does_not_decode_has_no_preview(api, chat):
    end_user, session = chat
    saved = api.save("ada", "fake.png", b"not an image", "image/png", session=session).json()
    owner = Client()
    owner.force_login(end_user.user)
    assert owner.get(f"/api/artifacts/{saved['id']}/thumbnail/").status_code == 404


def test_a_file_data_part_is_kept_as_given(api, chat):
    _, session = chat
    reference = {
        "file_uri": "gs://bucket/report.pdf",
        "mime_type": "application/pdf",
        "display_name": "Q3 report",
    }

    saved = api.client.post(
        api.files("ada", session),
        {"filename": "report", "file_data": json.dumps(reference)},
    )

    assert saved.status_code == 201, saved.content
    assert saved.json()["mime_type"] == "application/pdf"
    loaded = api.client.get(api.files("ada", session) + "report/versions/latest/").json()
    assert loaded["part"] == {"file_data": reference}


def test_a_save_is_either_a_file_or_a_file_data_part(api, chat):
    _, session = chat
    neither = api.client.post(api.files("ada", session), {"filename": "x"})
    both = api.client.post(
        api.files("ada", session),
        {
            "filename": "x",
            "file_data": json.dumps({"file_uri": "gs://b/x"}),
            "file": SimpleUploadedFile("artifact", b"x", content_type="text/plain"),
        },
    )
    malformed = api.client.post(
        api.files("ada", session), {"filename": "x", "file_data": '{"uri": 1}'}
    )
    assert [each.status_code for each in (neither, both, malformed)] == [400, 400, 400]
    assert not ArtifactRecord.objects.exists()


def test_a_filename_with_slashes_is_kept_as_given_and_reached_percent_encoded(api, chat):
    _, session = chat
    name = "reports/2026/q1 résumé.txt"
    encoded = quote(quote(name, safe=""), safe="")

    assert api.save("ada", name, b"q1", None, session=session).status_code == 201

    assert api.client.get(api.files("ada", session)).json() == {"filenames": [name]}
    loaded = api.client.get(api.files("ada", session) + f"{encoded}/versions/0/").json()
    assert loaded["part"] == {"text": "q1"}
    assert loaded["canonical_uri"].endswith(f"/artifacts/{name}/versions/0")
    assert api.client.delete(api.files("ada", session) + f"{encoded}/").status_code == 204
    assert not ArtifactRecord.objects.exists()


def test_a_file_over_the_limit_is_refused(api, chat, settings):
    _, session = chat
    settings.ATTACHMENT_MAX_BYTES = 100

    refused = api.save("ada", "a.txt", b"x" * 101, None, session=session)
    assert refused.status_code == 400
    assert "ATTACHMENT_MAX_BYTES" in refused.json()["detail"]
    assert api.save("ada", "a.txt", b"x" * 70_000, None, session=session).status_code == 413
    assert not ArtifactRecord.objects.exists()


def test_adks_rewind_marker_is_kept(api, chat):
    _, session = chat
    assert api.save("ada", "a.txt", b"kept", None, session=session).status_code == 201

    marker = api.save("ada", "a.txt", b"", "application/octet-stream", session=session)

    assert marker.status_code == 201
    loaded = api.client.get(api.files("ada", session) + "a.txt/versions/1/").json()
    assert loaded["part"] == {"inline_data": {"mime_type": "application/octet-stream", "data": ""}}


def test_another_users_or_an_unknown_session_is_not_reached(api, chat):
    _, session = chat
    end_user_ensure(app=app_ensure(name=APP)[0], external_id="bea")

    assert api.save("bea", "a.txt", b"x", None, session=session).status_code == 404
    assert api.save("ada", "a.txt", b"x", None, session="no-such").status_code == 404
    assert api.save("nobody", "a.txt", b"x", None, session=session).status_code == 404
    assert not EndUser.objects.filter(external_id="nobody").exists()
    assert api.save("ada", "a.txt", b"mine", None, session=session).status_code == 201
    assert api.client.get(api.files("bea", session)).json() == {"filenames": []}
    assert api.client.get(api.files("bea", session) + "a.txt/").json() == {"versions": []}
    theirs = api.client.get(api.files("bea", session) + "a.txt/versions/0/")
    assert theirs.status_code == 404
    assert api.client.delete(api.files("bea", session) + "a.txt/").status_code == 204
    assert ArtifactRecord.objects.count() == 1
    assert api.client.get(api.files("nobody")).json() == {"filenames": []}
    assert not EndUser.objects.filter(external_id="nobody").exists()


def test_a_name_no_file_of_the_route_can_have_reads_as_absent(api, chat):
    _, session = chat
    assert api.save("ada", "a.txt", b"mine", None, session=session).status_code == 201

    for path in (
        api.files("ada") + "a.txt/",
        api.files("ada") + "a.txt/versions/0/",
        api.files("ada", session) + "bad%07name/",
    ):
        assert api.client.get(path).status_code == 404, path
        assert api.client.delete(path).status_code in (404, 405), path
    assert ArtifactRecord.objects.count() == 1


def test_deleting_a_file_removes_its_versions_and_their_bytes(
    api, chat, artifacts_dir, django_capture_on_commit_callbacks
):
    end_user, session = chat
    for text in (b"v0", b"v1"):
        api.save("ada", "report.txt", text, None, session=session)
    assert len(stored_files(artifacts_dir)) == 2

    with django_capture_on_commit_callbacks(execute=True):
        answer = api.client.delete(api.files("ada", session) + "report.txt/")

    assert answer.status_code == 204
    assert stored_files(artifacts_dir) == []
    assert (
        selectors.artifact_keys_list(
            app_name=APP, user_id=str(end_user.user_id), session_id=session
        )
        == []
    )
