"""Events of any size ADK accepts: large files and tool results kept in the artifacts storage
beside the event, given back whole by every read, gone with the session."""

import base64
import json
import os
import time

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse
from google.genai import types

from sessions_app import selectors, services
from sessions_app.errors import DuplicateEventError, InvalidEventError
from sessions_app.event_blobs import BLOB_FOLDER, BLOB_KEY
from sessions_app.events import Event
from sessions_app.models import EventBlob, EventRecord, SessionRecord
from sessions_app.services.artifacts import ORPHAN_FILE_MIN_AGE_SECONDS
from tests.factories import UserFactory

APP = "demo"
PHOTO = os.urandom(2 * 1024 * 1024)
DOCUMENT = {"title": "Report", "pages": ["é" * 1000 + str(page) for page in range(300)]}


def blob_files(folder):
    root = folder / BLOB_FOLDER
    return sorted(path for path in root.rglob("*") if path.is_file()) if root.exists() else []


def photo_event(data: bytes = PHOTO, **fields) -> Event:
    return Event(
        author="user",
        content=types.Content(
            role="user",
            parts=[
                types.Part(text="What is in this photo?"),
                types.Part(inline_data=types.Blob(data=data, mime_type="image/jpeg")),
            ],
        ),
        **fields,
    )


def tool_result_event(response: dict, **fields) -> Event:
    return Event(
        author="agent",
        invocation_id="inv-1",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1", name="fetch_report", response=response
                    )
                )
            ],
        ),
        **fields,
    )


def tool_call_event() -> Event:
    return Event(
        author="agent",
        invocation_id="inv-1",
        content=types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(id="call-1", name="fetch_report"))],
        ),
    )


def stored_session(session):
    return selectors.session_get(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id
    )


@pytest.fixture
def session(user):
    return services.session_create(app_name=APP, user_id=str(user.pk))


def test_a_large_file_and_tool_result_are_stored_beside_the_event_and_read_back_whole(
    session, artifacts_dir
):
    services.event_append(session=session, event=photo_event())
    services.event_append(session=session, event=tool_call_event())
    services.event_append(session=session, event=tool_result_event(DOCUMENT))

    events = stored_session(session).events
    assert events[0].content.parts[1].inline_data.data == PHOTO
    assert events[0].content.parts[1].inline_data.mime_type == "image/jpeg"
    assert events[0].content.parts[0].text == "What is in this photo?"
    assert events[2].content.parts[0].function_response.response == DOCUMENT
    assert events[2].content.parts[0].function_response.id == "call-1"
    assert [event.model_dump() for event in events] == [
        event.model_dump() for event in session.events
    ]
    rows = EventRecord.objects.order_by("sequence")
    assert all(len(str(row.content)) < 2000 for row in rows)
    assert EventBlob.objects.count() == 2
    assert sorted(path.stat().st_size for path in blob_files(artifacts_dir))[-1] == len(PHOTO)


def test_a_small_part_stays_in_the_events_row(session, artifacts_dir):
    services.event_append(session=session, event=photo_event(b"tiny image"))
    row = EventRecord.objects.get()
    assert BLOB_KEY not in row.content["parts"][1]
    assert not EventBlob.objects.exists() and blob_files(artifacts_dir) == []


def test_an_event_over_the_limit_is_refused_saying_the_limit_and_nothing_is_kept(
    session, settings, artifacts_dir
):
    settings.MAX_EVENT_BYTES = 1024 * 1024
    with pytest.raises(InvalidEventError) as refused:
        services.event_append(session=session, event=photo_event())
    assert "the limit is 1 MB" in str(refused.value)
    assert "MAX_EVENT_BYTES" in str(refused.value)
    assert not EventRecord.objects.exists() and not EventBlob.objects.exists()
    assert blob_files(artifacts_dir) == []


def test_the_limit_counts_a_files_bytes_not_its_base64(session, settings):
    settings.MAX_EVENT_BYTES = len(PHOTO) + 1024
    services.event_append(session=session, event=photo_event())
    assert stored_session(session).events[0].content.parts[1].inline_data.data == PHOTO


def test_a_tool_result_over_the_limit_is_stored_as_an_error_so_the_call_stays_answered(
    session, settings
):
    settings.MAX_EVENT_BYTES = 100 * 1024
    services.event_append(session=session, event=tool_call_event())
    answer = tool_result_event(DOCUMENT)

    services.event_append(session=session, event=answer)

    stored = stored_session(session).events
    result = stored[1].content.parts[0].function_response
    assert result.id == "call-1" and result.name == "fetch_report"
    assert "not kept" in result.response["error"]
    assert "the server's limit of 100 KB" in result.response["error"]
    assert answer.content.parts[0].function_response.response == result.response
    assert session.events[1].content.parts[0].function_response.response == result.response


def test_an_event_that_is_not_stored_leaves_no_blob(session, artifacts_dir):
    first = photo_event()
    services.event_append(session=session, event=first)
    again = photo_event(os.urandom(300 * 1024), id=first.id)

    with pytest.raises(DuplicateEventError):
        services.event_append(session=session, event=again)

    assert EventBlob.objects.count() == 1
    assert len(stored_session(session).events) == 1


@pytest.mark.django_db(transaction=True)
def test_deleting_the_session_deletes_its_blobs_and_their_files(artifacts_dir):
    user = UserFactory()
    session = services.session_create(app_name=APP, user_id=str(user.pk))
    kept = services.session_create(app_name=APP, user_id=str(user.pk))
    services.event_append(session=session, event=photo_event())
    services.event_append(session=kept, event=photo_event(os.urandom(100 * 1024)))
    assert len(blob_files(artifacts_dir)) == 2

    services.session_delete(app_name=APP, user_id=str(user.pk), session_id=session.id)

    assert EventBlob.objects.count() == 1
    assert [path.stat().st_size for path in blob_files(artifacts_dir)] == [100 * 1024]


@pytest.mark.django_db(transaction=True)
async def test_an_append_from_the_event_loop_stores_and_reads_back_large_parts(artifacts_dir):
    user = await sync_to_async(UserFactory)()
    sessions = services.SessionService()
    session = await sessions.create_session(app_name=APP, user_id=str(user.pk))

    await sessions.append_event(session, photo_event())
    await sessions.append_event(session, tool_call_event())
    await sessions.append_event(session, tool_result_event(DOCUMENT))

    again = await sessions.get_session(app_name=APP, user_id=str(user.pk), session_id=session.id)
    assert again.events[0].content.parts[1].inline_data.data == PHOTO
    assert again.events[2].content.parts[0].function_response.response == DOCUMENT
    assert await sync_to_async(EventBlob.objects.count)() == 2


def test_files_of_events_no_row_names_are_swept_a_day_later(session, artifacts_dir):
    services.event_append(session=session, event=photo_event())
    used = blob_files(artifacts_dir)
    stray = artifacts_dir / BLOB_FOLDER / "999" / "left-by-a-rolled-back-append"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"x")

    assert services.artifact_files_orphaned_delete() == 0
    later = time.time() + ORPHAN_FILE_MIN_AGE_SECONDS + 60
    assert services.artifact_files_orphaned_delete(now=later) == 1
    assert blob_files(artifacts_dir) == used
    assert stored_session(session).events[0].content.parts[1].inline_data.data == PHOTO


def test_the_rest_api_takes_an_event_larger_than_other_bodies_and_gives_it_back(
    api_client, user, settings
):
    session = services.session_create(app_name="chat", user_id=str(user.pk))
    body = photo_event().model_dump(mode="json", exclude_none=True)
    assert len(str(body)) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    created = api_client.post(f"/api/sessions/{session.id}/events/", body, format="json")

    assert created.status_code == 201, created.content[:300]
    listed = api_client.get(f"/api/sessions/{session.id}/events/").json()
    data = listed["results"][0]["content"]["parts"][1]["inline_data"]["data"]
    assert base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)) == PHOTO


def test_the_rest_api_answers_413_naming_the_limit_over_an_events_body_limit(
    api_client, user, settings
):
    settings.EVENT_REQUEST_MAX_BYTES = 1024 * 1024
    session = services.session_create(app_name="chat", user_id=str(user.pk))

    refused = api_client.post(
        f"/api/sessions/{session.id}/events/",
        photo_event().model_dump(mode="json", exclude_none=True),
        format="json",
    )

    assert refused.status_code == 413
    assert "EVENT_REQUEST_MAX_BYTES" in refused.json()["detail"]
    assert not EventRecord.objects.exists() and not EventBlob.objects.exists()


def test_other_json_routes_keep_the_smaller_body_limit(api_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    refused = api_client.post(
        "/api/sessions/", {"app_name": "chat", "title": "x" * 2000}, format="json"
    )
    assert refused.status_code == 413
    assert not SessionRecord.objects.exists()


def test_the_data_export_holds_the_large_parts_whole(user, session):
    services.event_append(session=session, event=photo_event())
    client = Client()
    client.force_login(user)

    response = client.get(reverse("data-export"))

    document = json.loads(b"".join(response.streaming_content))
    part = document["sessions"][0]["events"][0]["content"]["parts"][1]
    assert BLOB_KEY not in part
    data = part["inline_data"]["data"]
    assert base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)) == PHOTO
