"""The chat socket reads its app at every turn: the agent as the console saves it now, and
whether the signed-in user may still use the app (an app open to a group, an end user's
account)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group

from agents_app.models import App, EndUser
from sessions_app import services
from tests.agents_app.chat.test_consumers import (  # noqa: F401 (the autouse fixtures)
    _cookie,
    _open,
    _receive,
    _send_message,
    _stored,
    _stored_text,
    _until,
    chat_settings,
    close_thread_connections,
)

pytestmark = pytest.mark.django_db(transaction=True)

APP = "support-desk"


@pytest.fixture
def cookie(user):
    return _cookie(user)


def _group_app_session(user):
    """An app open to one group, the user in it, and a chat of the user in the app."""
    app = App.objects.create(name=APP, open_to_all=False, tools=["set_state"])
    group = Group.objects.create(name="support-staff")
    app.allowed_groups.add(group)
    user.groups.add(group)
    return group, services.session_create(app_name=APP, user_id=str(user.pk))


def _events(frames):
    return [frame["event"] for frame in frames if frame["type"] == "event"]


def _calls(events):
    return [
        part["function_call"]["name"]
        for event in events
        for part in (event.get("content") or {}).get("parts", [])
        if part.get("function_call")
    ]


async def test_each_turn_reads_the_apps_agent_and_the_users_access_again(user, cookie):
    group, session = await database_sync_to_async(_group_app_session)(user)
    communicator = await _open(session.id, cookie)

    await _send_message(communicator, "my name is Ada")
    first = _events(await _until(communicator, "turn_complete"))
    await database_sync_to_async(App.objects.filter(name=APP).update)(
        tools=[], agent_name="desk-agent"
    )
    await _send_message(communicator, "my name is Bea")
    second = _events(await _until(communicator, "turn_complete"))
    await database_sync_to_async(user.groups.remove)(group)
    await _send_message(communicator, "are you there?")
    refused = await _receive(communicator)

    assert _calls(first) == ["set_state"]
    assert first[-1]["author"] == "assistant"
    assert _calls(second) == [], "the app no longer offers the tool"
    assert second[-1]["author"] == "desk-agent"
    assert (refused["type"], refused["code"]) == ("error", "app_forbidden")
    stored = await _stored(session.id)
    assert [_stored_text(r) for r in stored if r.author == "user"] == [
        "my name is Ada",
        "my name is Bea",
    ]
    await communicator.disconnect()


async def test_an_account_made_an_end_user_may_no_longer_chat_in_the_browser(user, cookie):
    app = await App.objects.acreate(name=APP, open_to_all=True)
    session = await database_sync_to_async(services.session_create)(
        app_name=APP, user_id=str(user.pk)
    )
    communicator = await _open(session.id, cookie)
    await _send_message(communicator, "hello")
    await _until(communicator, "turn_complete")

    await EndUser.objects.acreate(app=app, external_id="customer-7", user=user)
    await _send_message(communicator, "hello again")
    refused = await _receive(communicator)

    assert (refused["type"], refused["code"]) == ("error", "app_forbidden")
    stored = await _stored(session.id)
    assert [_stored_text(r) for r in stored if r.author == "user"] == ["hello"]
    await communicator.disconnect()
