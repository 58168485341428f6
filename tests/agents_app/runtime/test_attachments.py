"""Files named in a conversation as the model reads them: the bytes of the types a model
reads, and only the name of anything else an agent saved."""

import pytest
from asgiref.sync import sync_to_async
from google.genai import types

from agents_app.runtime.attachments import contents_attachments_read
from sessions_app import services
from sessions_app.selectors import artifact_version_describe
from tests.factories import UserFactory
from tests.sample_files import image_bytes

APP = "chat"


def _saved(user_id: str, session_id: str, filename: str, part: types.Part) -> types.Part:
    record = services.artifact_save(
        app_name=APP, user_id=user_id, session_id=session_id, filename=filename, artifact=part
    )
    described = artifact_version_describe(record)
    return types.Part(file_data=types.FileData(file_uri=described.canonical_uri))


@pytest.mark.django_db(transaction=True)
async def test_a_model_gets_the_bytes_of_an_image_and_only_the_name_of_other_files():
    user = await sync_to_async(UserFactory)()
    uid = str(user.pk)
    session = await sync_to_async(services.session_create)(app_name=APP, user_id=uid)
    png = image_bytes()
    save = sync_to_async(_saved)
    picture = await save(
        uid, session.id, "photo.png", types.Part.from_bytes(data=png, mime_type="image/png")
    )
    archive = await save(
        uid,
        session.id,
        "backup.zip",
        types.Part.from_bytes(data=b"PK\x03\x04 zipped", mime_type="application/zip"),
    )
    linked = await save(
        uid,
        session.id,
        "linked",
        types.Part(
            file_data=types.FileData(file_uri="gs://bucket/x.pdf", mime_type="application/pdf")
        ),
    )
    asked = types.Content(role="user", parts=[types.Part(text="Look"), picture, archive, linked])

    (read,), infos = await contents_attachments_read([asked], app_name=APP, user_id=uid)

    inline = [part.inline_data for part in read.parts if part.inline_data]
    assert [(blob.mime_type, blob.data) for blob in inline] == [("image/png", png)]
    labels = [part.text for part in read.parts if part.text and part.text != "Look"]
    assert any("backup.zip: application/zip" in label for label in labels)
    assert any("linked: application/pdf" in label for label in labels)
    assert [info.filename for info in infos] == ["photo.png"]
