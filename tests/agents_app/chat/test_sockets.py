"""A chat socket lives only as long as the sign-in it was opened with (issue 27): signing out,
a password change from another browser, deactivation and deletion of the account each close it
with 4401, a running turn stopped first; and a socket whose sign-in ended without the push
reaching it (the channel layer drops messages) closes at its next frame.

Runs on whichever channel layer the settings choose: in-memory by default, channels-redis
when ``REDIS_URL`` is set.
"""

import json

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.test import Client

from agents_app.chat.consumers import CLOSE_NOT_SIGNED_IN
from sessions_app.models import EventRecord
from tests.agents_app.chat.test_consumers import (
    WAIT,
    _open,
    _send_message,
    _until,
    chat_settings,  # noqa: F401 (autouse fixture)
    close_thread_connections,  # noqa: F401 (autouse fixture)
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

PASSWORD = "correct horse battery staple"  # tests.factories.UserFactory's


def _browser(user) -> Client:
    """A browser signed in as ``user``, with its own Django session."""
    client = Client()
    client.force_login(user)
    return client


def _cookie_of(browser: Client) -> bytes:
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={browser.cookies[name].value}".encode()


async def _frames_until_closed(communicator) -> tuple[list[dict], int]:
    """The frames the socket sends up to its close, and the close code."""
    frames = []
    while True:
        output = await communicator.receive_output(timeout=WAIT)
        if output["type"] == "websocket.close":
            return frames, output.get("code")
        frames.append(json.loads(output["text"]))


async def _pong(communicator) -> dict:
    await communicator.send_json_to({"type": "ping"})
    return await communicator.receive_json_from(timeout=WAIT)


def _sign_out(browser, user):
    assert browser.post("/accounts/logout/").status_code in (200, 302)


def _password_change_elsewhere(browser, user):
    response = _browser(user).post(
        "/accounts/password_change/",
        {
            "old_password": PASSWORD,
            "new_password1": "a new and better passphrase",
            "new_password2": "a new and better passphrase",
        },
    )
    assert response.status_code == 302, response.content


def _deactivate(browser, user):
    user.is_active = False
    user.save()


def _delete(browser, user):
    user.delete()


@pytest.mark.parametrize(
    "sign_in_end", [_sign_out, _password_change_elsewhere, _deactivate, _delete]
)
async def test_the_socket_closes_when_its_sign_in_ends(user, session, sign_in_end):
    browser = await database_sync_to_async(_browser)(user)
    communicator = await _open(session.id, _cookie_of(browser))
    assert (await _pong(communicator))["type"] == "pong"

    await database_sync_to_async(sign_in_end)(browser, user)

    frames, code = await _frames_until_closed(communicator)
    assert code == CLOSE_NOT_SIGNED_IN
    assert frames == []


async def test_a_running_turn_stops_when_the_sign_in_ends(settings, user, session):
    """Nothing more of the turn runs under the ended sign-in: its reply so far is stored as
    interrupted, and no event is stored after the socket closed."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    browser = await database_sync_to_async(_browser)(user)
    communicator = await _open(session.id, _cookie_of(browser))
    await _send_message(communicator, "tell me " + "a long story " * 40, "long-1")
    await _until(communicator, "delta")

    await database_sync_to_async(_sign_out)(browser, user)

    _, code = await _frames_until_closed(communicator)
    assert code == CLOSE_NOT_SIGNED_IN
    stored = await database_sync_to_async(
        lambda: list(
            EventRecord.objects.filter(session__session_id=session.id)
            .order_by("sequence")
            .values_list("author", "interrupted")
        )
    )()
    assert stored == [("user", None), ("assistant", True)]
    await communicator.disconnect()
    assert await database_sync_to_async(EventRecord.objects.count)() == 2


async def test_signing_out_in_another_browser_leaves_this_one_open(user, session):
    here = await database_sync_to_async(_browser)(user)
    elsewhere = await database_sync_to_async(_browser)(user)
    communicator = await _open(session.id, _cookie_of(here))

    await database_sync_to_async(_sign_out)(elsewhere, user)

    assert (await _pong(communicator))["type"] == "pong"
    await communicator.disconnect()


def _session_row_delete(browser, user):
    """Sign the browser out with no signal sent, as if the push were lost."""
    Session.objects.filter(session_key=browser.session.session_key).delete()


def _deactivate_silently(browser, user):
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)


def _password_change_silently(browser, user):
    password = get_user_model().objects.get(pk=user.pk)
    password.set_password("a new and better passphrase")
    get_user_model().objects.filter(pk=user.pk).update(password=password.password)


@pytest.mark.parametrize(
    "sign_in_end", [_session_row_delete, _deactivate_silently, _password_change_silently]
)
async def test_every_frame_checks_the_sign_in_when_the_push_is_lost(
    settings, user, session, sign_in_end
):
    settings.CHAT_SIGNIN_RECHECK_SECONDS = 0
    browser = await database_sync_to_async(_browser)(user)
    communicator = await _open(session.id, _cookie_of(browser))
    assert (await _pong(communicator))["type"] == "pong"

    await database_sync_to_async(sign_in_end)(browser, user)
    await _send_message(communicator, "still there?", "after-1")

    frames, code = await _frames_until_closed(communicator)
    assert code == CLOSE_NOT_SIGNED_IN
    assert frames == []
    assert not await database_sync_to_async(
        EventRecord.objects.filter(session__session_id=session.id).exists
    )()


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "ping"},
        {"type": "cancel"},
        {"type": "user_message", "text": "still there?", "client_message_id": "after-2"},
        {
            "type": "user_message",
            "text": "with a file",
            "client_message_id": "after-3",
            "attachments": ["an-attachment"],
        },
        {"type": "retry", "client_message_id": "after-4"},
        {"type": "edit", "text": "again", "client_message_id": "after-5", "message_id": "m-1"},
        {"type": "regenerate", "client_message_id": "after-6", "message_id": "m-1"},
    ],
    ids=lambda frame: frame["type"] + ("+attachments" if "attachments" in frame else ""),
)
async def test_a_frame_of_every_kind_checks_the_sign_in(settings, user, session, frame):
    """A frame that starts a turn has the sign-in checked in the turn's first read, any
    other frame before it is handled: either way a socket whose sign-in ended is closed
    before it answers or stores anything."""
    settings.CHAT_SIGNIN_RECHECK_SECONDS = 0
    browser = await database_sync_to_async(_browser)(user)
    communicator = await _open(session.id, _cookie_of(browser))
    assert (await _pong(communicator))["type"] == "pong"

    await database_sync_to_async(_session_row_delete)(browser, user)
    await communicator.send_json_to(frame)

    frames, code = await _frames_until_closed(communicator)
    assert code == CLOSE_NOT_SIGNED_IN
    assert frames == []
    assert not await database_sync_to_async(
        EventRecord.objects.filter(session__session_id=session.id).exists
    )()
