"""The attachments REST API, with hostile input: a clear error, nothing stored, nothing served."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image
from rest_framework.test import APIClient

from access_app.models import AuditLogEntry
from sessions_app import services
from sessions_app.models import ArtifactRecord
from tests.factories import AccessGrantFactory, StaffFactory
from tests.sample_files import image_bytes, pdf_bytes

PNG = image_bytes("PNG")
PDF = pdf_bytes()


def upload(name, data, content_type="application/octet-stream"):
    return SimpleUploadedFile(name, data, content_type=content_type)


def stored_files(folder):
    return sorted(path for path in folder.rglob("*") if path.is_file())


@pytest.fixture
def session(user):
    return services.session_create(app_name="chat", user_id=str(user.pk))


def url(session_id):
    return f"/api/sessions/{session_id}/artifacts/"


def test_an_image_and_a_pdf_are_stored_listed_and_downloaded(api_client, session, artifacts_dir):
    response = api_client.post(
        url(session.id),
        {"file": [upload("logo.png", PNG, "image/png"), upload("spec.pdf", PDF)]},
        format="multipart",
    )

    assert response.status_code == 201, response.content
    logo, spec = response.json()
    assert (logo["filename"], logo["mime_type"], logo["size"], logo["version"]) == (
        "logo.png",
        "image/png",
        len(PNG),
        0,
    )
    assert (spec["filename"], spec["mime_type"], spec["size"]) == (
        "spec.pdf",
        "application/pdf",
        len(PDF),
    )
    assert len(stored_files(artifacts_dir)) == 2
    listed = api_client.get(url(session.id)).json()
    assert [each["filename"] for each in listed] == ["logo.png", "spec.pdf"]

    download = api_client.get(logo["download_url"])
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == PNG
    assert download["Content-Type"] == "image/png"
    assert download["X-Content-Type-Options"] == "nosniff"
    saved = api_client.get(spec["download_url"] + "?download=1")
    assert saved["Content-Disposition"].startswith('attachment; filename="spec.pdf"')


def test_the_same_name_again_is_its_next_version(api_client, session):
    api_client.post(url(session.id), {"file": upload("logo.png", PNG)}, format="multipart")
    again = api_client.post(
        url(session.id),
        {"file": upload("logo.png", image_bytes("PNG", (10, 10)))},
        format="multipart",
    )

    assert again.json()[0]["version"] == 1


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("logo.pdf", PNG, "named as a PDF document but its content is a PNG image"),
        ("page.html", b"<html><script>alert(1)</script></html>", ".html files are not accepted"),
        ("page.txt", b"<html><script>alert(1)</script></html>", "HTML or other markup"),
        ("empty.png", b"", "is empty"),
        ("cut.png", image_bytes("PNG", (300, 300))[:-50], "not a whole image"),
        ("cut.pdf", PDF[:-80], "not a whole PDF"),
    ],
)
def test_a_hostile_upload_is_refused_and_nothing_is_stored(
    api_client, session, artifacts_dir, name, data, message
):
    response = api_client.post(
        url(session.id),
        {"file": [upload("fine.png", PNG), upload(name, data)]},
        format="multipart",
    )

    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not ArtifactRecord.objects.exists()
    assert stored_files(artifacts_dir) == []


def raw_multipart(name: str, data: bytes) -> tuple[bytes, str]:
    """A body naming the file exactly so: test clients keep only a name's last part."""
    boundary = "XyZboundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize("name", ["../../../etc/cron.d/x.txt", "..\\..\\boot.txt", "..", "a/b.png"])
def test_a_file_name_that_is_a_path_is_refused(api_client, session, artifacts_dir, name):
    body, content_type = raw_multipart(name, b"hello")

    response = api_client.generic("POST", url(session.id), body, content_type=content_type)

    assert response.status_code == 400
    assert "cannot name an attachment" in response.json()["detail"]
    assert stored_files(artifacts_dir) == []


def test_an_oversized_upload_is_refused_before_it_is_read(
    api_client, session, settings, artifacts_dir
):
    settings.ATTACHMENT_MAX_BYTES = 1000
    settings.ATTACHMENT_MAX_COUNT = 1

    one_too_big = api_client.post(
        url(session.id), {"file": upload("big.txt", b"x" * 1001)}, format="multipart"
    )
    whole_body_too_big = api_client.post(
        url(session.id), {"file": upload("big.txt", b"x" * 200_000)}, format="multipart"
    )
    too_many = api_client.post(
        url(session.id),
        {"file": [upload("a.txt", b"a"), upload("b.txt", b"b")]},
        format="multipart",
    )

    assert one_too_big.status_code == 400
    assert "is 1,001 bytes; the limit is 1,000 bytes" in one_too_big.json()["detail"]
    assert whole_body_too_big.status_code == 413
    assert too_many.status_code == 400
    assert "at most 1 go with one message" in too_many.json()["detail"]
    assert stored_files(artifacts_dir) == []


def test_nothing_attached_or_not_multipart_is_refused(api_client, session):
    assert api_client.post(url(session.id), {}, format="multipart").status_code == 400
    assert api_client.post(url(session.id), {"file": "x"}, format="json").status_code == 415


def test_another_users_session_and_artifacts_answer_404_and_store_nothing(
    api_client, user, other_user, session, artifacts_dir
):
    theirs = services.session_create(app_name="chat", user_id=str(other_user.pk))
    their_artifact = services.artifact_save(
        app_name="chat",
        user_id=str(other_user.pk),
        session_id=theirs.id,
        filename="secret.png",
        artifact={"inlineData": {"data": PNG, "mimeType": "image/png"}},
    )

    into_theirs = api_client.post(
        url(theirs.id), {"file": upload("a.png", PNG)}, format="multipart"
    )
    list_theirs = api_client.get(url(theirs.id))
    download_theirs = api_client.get(f"/api/artifacts/{their_artifact.pk}/content/")
    unknown = api_client.get("/api/artifacts/00000000-0000-0000-0000-000000000000/content/")
    malformed = api_client.get("/api/artifacts/..%2F..%2Fetc%2Fpasswd/content/")

    assert [into_theirs.status_code, list_theirs.status_code] == [404, 404]
    assert [download_theirs.status_code, unknown.status_code, malformed.status_code] == [404] * 3
    assert b"secret" not in download_theirs.content
    assert ArtifactRecord.objects.count() == 1
    assert len(stored_files(artifacts_dir)) == 1


def test_signed_out_gets_nothing(session, user):
    record = services.artifact_save(
        app_name="chat",
        user_id=str(user.pk),
        session_id=session.id,
        filename="a.png",
        artifact={"inlineData": {"data": PNG, "mimeType": "image/png"}},
    )
    client = APIClient()

    assert client.get(f"/api/artifacts/{record.pk}/content/").status_code == 403
    assert (
        client.post(url(session.id), {"file": upload("a.png", PNG)}, format="multipart").status_code
        == 403
    )


def test_an_image_has_a_small_png_preview_and_a_pdf_has_none(api_client, session):
    big = image_bytes("JPEG", (1200, 600))
    stored = api_client.post(
        url(session.id),
        {"file": [upload("photo.jpg", big), upload("spec.pdf", PDF)]},
        format="multipart",
    ).json()
    photo, spec = stored

    preview = api_client.get(photo["thumbnail_url"])

    assert preview.status_code == 200
    assert preview["Content-Type"] == "image/png"
    with Image.open(io.BytesIO(preview.content)) as image:
        assert (image.format, image.size) == ("PNG", (320, 160))
    assert spec["thumbnail_url"] is None
    assert api_client.get(f"/api/artifacts/{spec['id']}/thumbnail/").status_code == 404


def test_staff_open_a_users_file_only_with_their_grant_and_each_read_is_audited(user, session):
    """A role's permissions are not enough: staff open a user's file with that user's grant,
    of conversations for a chat's attachment and of memories for a file of the user (such as
    the copy a memory keeps), and the user's audit log records each read. The owner always
    opens their own."""
    record = services.artifact_save(
        app_name="chat",
        user_id=str(user.pk),
        session_id=session.id,
        filename="a.png",
        artifact={"inlineData": {"data": PNG, "mimeType": "image/png"}},
    )
    kept = services.artifact_user_copy(record=record)
    staff = StaffFactory(is_superuser=True)
    client = APIClient()
    client.force_authenticate(staff)
    owner = APIClient()
    owner.force_authenticate(user)

    def answers(each):
        return [
            client.get(f"/api/artifacts/{each.pk}/{view}/").status_code
            for view in ("content", "thumbnail")
        ]

    assert answers(record) == answers(kept) == [404, 404]
    assert not AuditLogEntry.objects.filter(subject_user=user).exists()

    AccessGrantFactory(owner=user, grantee=staff, scope="memories")
    assert (answers(record), answers(kept)) == ([404, 404], [200, 200])
    AccessGrantFactory(owner=user, grantee=staff, scope="conversations")
    response = client.get(f"/api/artifacts/{record.pk}/content/?download=1")
    assert response.status_code == 200 and b"".join(response.streaming_content) == PNG

    logged = AuditLogEntry.objects.filter(subject_user=user, actor=staff, action="view")
    assert sorted(logged.values_list("object_type", "object_id")) == sorted(
        [
            ("sessions_app.artifactrecord", str(kept.pk)),
            ("sessions_app.artifactrecord", str(kept.pk)),
            ("sessions_app.artifactrecord", str(record.pk)),
        ]
    )
    assert [
        owner.get(f"/api/artifacts/{each.pk}/content/").status_code for each in (record, kept)
    ] == [200, 200]
    assert logged.count() == 3
