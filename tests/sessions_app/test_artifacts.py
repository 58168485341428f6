"""Artifacts with ADK's semantics, on the local file system storage."""

import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from google.genai import types

from sessions_app import selectors, services
from sessions_app.errors import InvalidArtifactError, SessionNotFoundError
from sessions_app.models import ArtifactRecord
from sessions_app.services import ArtifactService
from sessions_app.services.artifacts import ORPHAN_FILE_MIN_AGE_SECONDS
from tests.factories import UserFactory

APP = "demo"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def stored_files(folder):
    return sorted(path for path in folder.rglob("*") if path.is_file())


def image(data: bytes = PNG) -> types.Part:
    return types.Part(inline_data=types.Blob(data=data, mime_type="image/png"))


@pytest.fixture
def session(user):
    return services.session_create(app_name=APP, user_id=str(user.pk))


@pytest.mark.django_db(transaction=True)
async def test_versions_load_list_and_delete_as_adk_does(artifacts_dir):
    user = await sync_to_async(UserFactory)()
    uid = str(user.pk)
    sessions = services.SessionService()
    one = await sessions.create_session(app_name=APP, user_id=uid)
    two = await sessions.create_session(app_name=APP, user_id=uid)
    artifacts = ArtifactService()

    first = await artifacts.save_artifact(
        app_name=APP, user_id=uid, session_id=one.id, filename="logo.png", artifact=image()
    )
    second = await artifacts.save_artifact(
        app_name=APP,
        user_id=uid,
        session_id=one.id,
        filename="logo.png",
        artifact=image(PNG + b"v2"),
        custom_metadata={"source": "upload"},
    )
    notes = await artifacts.save_artifact(
        app_name=APP, user_id=uid, filename="user:notes.md", artifact=types.Part(text="# Hi")
    )

    assert (first, second, notes) == (0, 1, 0)
    latest = await artifacts.load_artifact(
        app_name=APP, user_id=uid, session_id=one.id, filename="logo.png"
    )
    assert latest.inline_data.data == PNG + b"v2"
    assert latest.inline_data.mime_type == "image/png"
    oldest = await artifacts.load_artifact(
        app_name=APP, user_id=uid, session_id=one.id, filename="logo.png", version=0
    )
    assert oldest.inline_data.data == PNG
    assert (
        await artifacts.load_artifact(
            app_name=APP, user_id=uid, session_id=one.id, filename="logo.png", version=7
        )
        is None
    )
    assert await artifacts.list_versions(
        app_name=APP, user_id=uid, session_id=one.id, filename="logo.png"
    ) == [0, 1]
    described = await artifacts.get_artifact_version(
        app_name=APP, user_id=uid, session_id=one.id, filename="logo.png"
    )
    assert described.version == 1
    assert described.mime_type == "image/png"
    assert described.custom_metadata == {"source": "upload"}
    assert described.canonical_uri == (
        f"artifact://apps/{APP}/users/{uid}/sessions/{one.id}/artifacts/logo.png/versions/1"
    )
    # A user: artifact is seen from every session of the user, and without one; a session's
    # artifact only from its own session.
    assert await artifacts.list_artifact_keys(app_name=APP, user_id=uid, session_id=one.id) == [
        "logo.png",
        "user:notes.md",
    ]
    assert await artifacts.list_artifact_keys(app_name=APP, user_id=uid, session_id=two.id) == [
        "user:notes.md"
    ]
    assert await artifacts.list_artifact_keys(app_name=APP, user_id=uid) == ["user:notes.md"]
    text = await artifacts.load_artifact(
        app_name=APP, user_id=uid, session_id=two.id, filename="user:notes.md"
    )
    assert text == types.Part(text="# Hi")
    assert (
        await artifacts.load_artifact(
            app_name=APP, user_id=uid, session_id=two.id, filename="logo.png"
        )
        is None
    )
    assert len(stored_files(artifacts_dir)) == 3

    await artifacts.delete_artifact(
        app_name=APP, user_id=uid, session_id=one.id, filename="logo.png"
    )

    assert (
        await artifacts.list_versions(
            app_name=APP, user_id=uid, session_id=one.id, filename="logo.png"
        )
        == []
    )
    assert (
        await artifacts.load_artifact(
            app_name=APP, user_id=uid, session_id=one.id, filename="logo.png"
        )
        is None
    )
    assert len(stored_files(artifacts_dir)) == 1  # the files of both versions went with them


def test_a_session_filename_needs_a_session(user):
    with pytest.raises(InvalidArtifactError, match="Session ID must be provided"):
        services.artifact_save(
            app_name=APP, user_id=str(user.pk), filename="logo.png", artifact=image()
        )


@pytest.mark.parametrize("filename", ["user:", "", "   ", "bad\x00.png", "a\nb", "x" * 300])
def test_a_filename_that_names_nothing_is_refused_and_nothing_is_stored(
    user, session, artifacts_dir, filename
):
    with pytest.raises(InvalidArtifactError):
        services.artifact_save(
            app_name=APP,
            user_id=str(user.pk),
            session_id=session.id,
            filename=filename,
            artifact=image(),
        )
    assert not ArtifactRecord.objects.exists()
    assert stored_files(artifacts_dir) == []


@pytest.mark.parametrize("filename", ["../../etc/passwd", "a/b.png", "..\\evil.png", ".."])
def test_a_filename_as_adk_allows_it_is_kept_as_given_and_never_reaches_a_path(
    user, session, artifacts_dir, filename
):
    services.artifact_save(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session.id,
        filename=filename,
        artifact=image(),
    )

    assert selectors.artifact_keys_list(
        app_name=APP, user_id=str(user.pk), session_id=session.id
    ) == [filename]
    (stored,) = stored_files(artifacts_dir)
    assert stored.parent.parent == artifacts_dir
    assert stored.read_bytes() == PNG


def test_another_users_artifacts_read_as_absent_and_cannot_be_written(
    user, other_user, session, artifacts_dir
):
    record = services.artifact_save(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session.id,
        filename="a.png",
        artifact=image(),
    )

    assert (
        selectors.artifact_load(
            app_name=APP, user_id=str(other_user.pk), session_id=session.id, filename="a.png"
        )
        is None
    )
    assert selectors.artifact_owned_get(user_pk=other_user.pk, artifact_id=record.pk) is None
    assert selectors.artifact_owned_get(user_pk=user.pk, artifact_id=record.pk) == record
    assert selectors.artifact_owned_get(user_pk=user.pk, artifact_id="not-a-uuid") is None
    with pytest.raises(SessionNotFoundError):
        services.artifact_save(
            app_name=APP,
            user_id=str(other_user.pk),
            session_id=session.id,
            filename="b.png",
            artifact=image(),
        )
    with pytest.raises(SessionNotFoundError):
        services.artifact_save(
            app_name="other-app",
            user_id=str(user.pk),
            session_id=session.id,
            filename="b.png",
            artifact=image(),
        )
    assert ArtifactRecord.objects.count() == 1
    assert len(stored_files(artifacts_dir)) == 1


def test_a_part_without_data_or_text_is_refused(user, session, artifacts_dir):
    with pytest.raises(InvalidArtifactError):
        services.artifact_save(
            app_name=APP,
            user_id=str(user.pk),
            session_id=session.id,
            filename="call.json",
            artifact={"functionCall": {"name": "f", "args": {}}},
        )
    assert stored_files(artifacts_dir) == []


def test_a_dict_part_in_adks_camel_case_is_saved(user, session):
    services.artifact_save(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session.id,
        filename="a.png",
        artifact={"inlineData": {"data": PNG, "mimeType": "image/png"}},
    )
    loaded = selectors.artifact_load(
        app_name=APP, user_id=str(user.pk), session_id=session.id, filename="a.png"
    )
    assert loaded.inline_data.data == PNG


def test_deleting_the_session_or_the_account_removes_the_files(
    user, session, artifacts_dir, django_capture_on_commit_callbacks
):
    uid = str(user.pk)
    services.artifact_save(
        app_name=APP, user_id=uid, session_id=session.id, filename="a.png", artifact=image()
    )
    services.artifact_save(app_name=APP, user_id=uid, filename="user:b.png", artifact=image())
    assert len(stored_files(artifacts_dir)) == 2

    with django_capture_on_commit_callbacks(execute=True):
        services.session_delete(app_name=APP, user_id=uid, session_id=session.id)
    assert len(stored_files(artifacts_dir)) == 1  # the user's artifact outlives the session

    with django_capture_on_commit_callbacks(execute=True):
        user.delete()
    assert stored_files(artifacts_dir) == []
    assert not ArtifactRecord.objects.exists()


def test_a_file_whose_row_rolled_back_is_deleted_a_day_later(user, session, artifacts_dir):
    uid = str(user.pk)
    kept = services.artifact_save(
        app_name=APP, user_id=uid, session_id=session.id, filename="a.png", artifact=image()
    )
    with pytest.raises(RuntimeError), transaction.atomic():
        services.artifact_user_copy(record=kept)  # as a memory job's write copies a kept file
        raise RuntimeError("the write failed after the copy")
    assert len(stored_files(artifacts_dir)) == 2  # the copy's row rolled back, not its file

    assert services.artifact_files_orphaned_delete() == 0  # its transaction may still be open
    later = time.time() + ORPHAN_FILE_MIN_AGE_SECONDS + 60
    assert services.artifact_files_orphaned_delete(now=later) == 1
    assert stored_files(artifacts_dir) == [artifacts_dir / kept.storage_name]
    assert services.artifact_files_orphaned_delete(now=later) == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_saves_of_one_name_each_get_their_own_version(requires_postgres, artifacts_dir):
    user = UserFactory()
    session = services.session_create(app_name=APP, user_id=str(user.pk))
    errors = []

    def save(index):
        try:
            services.artifact_save(
                app_name=APP,
                user_id=str(user.pk),
                session_id=session.id,
                filename="a.png",
                artifact=image(PNG + bytes([index])),
            )
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    versions = selectors.artifact_versions_list(
        app_name=APP, user_id=str(user.pk), session_id=session.id, filename="a.png"
    )
    assert [version.version for version in versions] == [0, 1, 2, 3]
    assert len(stored_files(artifacts_dir)) == 4
