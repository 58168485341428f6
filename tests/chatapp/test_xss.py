"""Hostile text is inert wherever it is shown: chat history (the REST events' ``html``), the
WebSocket's event frames, the chat page, the memory page, the admin's memory and
conversation pages, and the data export.

"Inert" is checked on the parsed HTML, not on strings: no element the hostile text brought
in, no event-handler attribute, no ``javascript:``/``data:`` link, no script body carrying
it. Every payload sets the same marker (``pwned``), so whatever survived would show up.
tests/browser/test_xss.py checks the same in a real browser.
"""

from __future__ import annotations

import html
import json
import re
import uuid
from html.parser import HTMLParser

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse

from chatapp.asgi import application
from sessions_app import services
from sessions_app.events import Event
from tests.factories import MemoryFactory, UserFactory, session_key
from tests.websocket_client import WebsocketClient

MARKER = "pwned"
HOSTILE = [
    "<script>window.pwned = 1</script>",
    '<img src=x onerror="window.pwned = 1">',
    "<svg onload=window.pwned=1></svg>",
    '<iframe src="javascript:window.pwned=1"></iframe>',
    "[click me](javascript:window.pwned=1)",
    "[click me](JaVaScRiPt:window.pwned=1)",
    "[click me](&#106;avascript:window.pwned=1)",
    "[click me](data:text/html,<script>window.pwned=1</script>)",
    "![look](javascript:window.pwned=1)",
    '<a href="javascript:window.pwned=1">html link</a>',
    "**bold** <b onmouseover=window.pwned=1>hover</b>",
    '"><script>window.pwned=1</script>',
    "`code` <style>body{background:url(javascript:window.pwned=1)}</style>",
]
HOSTILE_TEXT = "\n\n".join(HOSTILE)
DANGEROUS_TAGS = {"script", "iframe", "svg", "img", "object", "embed", "style", "math", "form"}
DANGEROUS_SCHEMES = re.compile(r"^\s*(?:javascript|data|vbscript):", re.IGNORECASE)


class _Findings(HTMLParser):
    """Whatever in a document carries the marker and could run."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self._script: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attributes) -> None:
        attributes = dict(attributes)
        for name, value in attributes.items():
            value = value or ""
            if name.startswith("on") and MARKER in value:
                self.problems.append(f"<{tag} {name}={value!r}>")
            if name in {"href", "src", "action", "formaction", "xlink:href"} and (
                DANGEROUS_SCHEMES.match(html.unescape(value).replace("\x00", ""))
            ):
                self.problems.append(f"<{tag} {name}={value!r}>")
        if tag == "script":
            self._script = attributes
        if tag in DANGEROUS_TAGS and tag != "script" and MARKER in json.dumps(attributes):
            self.problems.append(f"<{tag} {attributes}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        # A json_script block holds data, and escapes "<" so nothing can close it early.
        if (
            self._script is not None
            and MARKER in data
            and (self._script.get("type") != "application/json" or "</" in data)
        ):
            self.problems.append(f"script body with the marker: {data[:80]!r}")


def assert_inert(document: str) -> None:
    findings = _Findings()
    findings.feed(document)
    findings.close()
    assert findings.problems == []
    for payload in HOSTILE:
        if "<" in payload:
            assert payload not in document, f"raw HTML came through: {payload!r}"


def test_the_checker_catches_what_it_looks_for():
    for live in [
        "<script>window.pwned=1</script>",
        '<img src=x onerror="window.pwned=1">',
        '<a href="javascript:window.pwned=1">x</a>',
        '<a href=" &#106;avascript:window.pwned=1">x</a>',
    ]:
        with pytest.raises(AssertionError):
            assert_inert(live)


@pytest.fixture
def hostile_session(user):
    """A session of ``user`` whose title and user message are hostile text."""
    session = services.session_create(app_name="chat", user_id=str(user.pk), session_id="xss-1")
    services.event_append(
        session=session,
        event=Event(
            invocation_id="e-1",
            author="user",
            content={"role": "user", "parts": [{"text": HOSTILE_TEXT}]},
        ),
    )
    services.session_rename(user_pk=user.pk, session_id=session.id, title=HOSTILE[0])
    return session


@pytest.mark.django_db
def test_chat_history_html_from_the_api_is_inert(api_client, hostile_session):
    events = api_client.get(f"/api/sessions/{hostile_session.id}/events/").json()["results"]

    rendered = events[0]["html"]
    assert_inert(rendered)
    assert "<strong>bold</strong>" in rendered, "Markdown is still rendered"
    assert "&lt;script&gt;" in rendered, "the hostile HTML is shown as text"
    assert events[0]["content"]["parts"][0]["text"] == HOSTILE_TEXT, "the text is kept as said"


@pytest.mark.django_db
def test_the_chat_page_shows_a_hostile_title_inert(client, user, hostile_session):
    client.force_login(user)

    page = client.get(reverse("chat-session", args=[hostile_session.id])).content.decode()

    assert_inert(page)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
async def test_websocket_event_frames_carry_inert_html(user, settings):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.001
    session = await database_sync_to_async(services.session_create)(
        app_name="chat", user_id=str(user.pk)
    )
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    socket = WebsocketClient(
        application,
        f"/ws/chat/{session.id}/",
        headers=[(b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", cookie)],
    )
    assert (await socket.connect(timeout=20))[0]

    await socket.send_json_to(
        {"type": "user_message", "text": HOSTILE_TEXT, "client_message_id": uuid.uuid4().hex}
    )
    frames = []
    while not frames or frames[-1]["type"] != "turn_complete":
        frames.append(await socket.receive_json_from(timeout=20))
    await socket.disconnect()

    events = [frame["event"] for frame in frames if frame["type"] == "event"]
    assert events[0]["author"] == "user"
    assert len(events) >= 2, "the reply (which repeats the message) is checked too"
    for event in events:
        assert_inert(event["html"])


@pytest.mark.django_db
def test_the_memory_page_shows_hostile_memory_text_inert(client, user):
    MemoryFactory(user=user, text=HOSTILE_TEXT, topic="<script>window.pwned=1</script>")
    client.force_login(user)

    page = client.get(reverse("memory")).content.decode()

    assert "window.pwned" in page, "the memory is on the page, as text"
    assert_inert(page)


@pytest.fixture
def staff_client(db):
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


@pytest.mark.django_db
def test_the_admin_memory_pages_show_hostile_text_inert(staff_client, user, hostile_session):
    memory = MemoryFactory(user=user, text=HOSTILE_TEXT, session=None)
    pages = [
        reverse("admin:memory_app_memory_changelist"),
        reverse("admin:memory_app_memory_changelist") + "?q=pwned",
        reverse("admin:memory_app_memory_change", args=[memory.pk]),
    ]
    for url in pages:
        response = staff_client.get(url)
        assert response.status_code == 200, url
        document = response.content.decode()
        assert "pwned" in document, url
        assert_inert(document)


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["approve", "reject", "invalidate", "delete_memories"])
def test_the_admin_review_confirmation_page_is_inert(staff_client, user, action):
    """The page asking for a reason lists the memories and links back to ``next``: hostile
    memory text and a ``javascript:`` next (the Cancel link) must both stay inert."""
    memory = MemoryFactory(user=user, text=HOSTILE_TEXT)

    response = staff_client.post(
        reverse("admin:memory_app_memory_changelist"),
        {
            "action": action,
            "_selected_action": [str(memory.pk)],
            "next": "javascript:window.pwned=1",
        },
    )

    assert response.status_code == 200
    document = response.content.decode()
    assert "Reason" in document
    assert_inert(document)


@pytest.mark.django_db
def test_the_access_page_names_what_staff_saw_inert(client, staff_client, user, hostile_session):
    """The user's access page quotes the memory text and conversation title staff opened."""
    memory = MemoryFactory(user=user, text=HOSTILE_TEXT)
    staff_client.get(reverse("admin:memory_app_memory_change", args=[memory.pk]))
    staff_client.get(
        reverse("admin:sessions_app_sessionrecord_change", args=[session_key(hostile_session)])
    )
    client.force_login(user)

    document = client.get(reverse("access:overview")).content.decode()

    assert "pwned" in document
    assert_inert(document)


@pytest.mark.django_db
def test_the_admin_conversation_page_shows_hostile_messages_inert(staff_client, hostile_session):
    pages = [
        reverse("admin:sessions_app_sessionrecord_changelist"),
        reverse("admin:sessions_app_sessionrecord_change", args=[session_key(hostile_session)]),
    ]
    for url in pages:
        response = staff_client.get(url)
        assert response.status_code == 200, url
        document = response.content.decode()
        assert "pwned" in document, url
        assert_inert(document)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in _strings(item)]


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/settings/export/", "/api/export/"])
def test_the_export_is_a_json_attachment_browsers_will_not_sniff(client, user, url):
    MemoryFactory(user=user, text=HOSTILE_TEXT)
    services.session_create(app_name="chat", user_id=str(user.pk), session_id="xss-export")
    client.force_login(user)

    response = client.get(url)
    body = b"".join(response.streaming_content) if response.streaming else response.content

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"].startswith("attachment")
    assert HOSTILE_TEXT in _strings(json.loads(body)), "the text is exported as it was"
