"""With the chat app's PII redaction on, a first message with an e-mail address in it titles the
chat with the placeholder: in the header, the session list, a search and after a reload; and
Settings says the app redacts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.server import Server

pytestmark = pytest.mark.browser

REDACTION = (
    "from agents_app.models import App\n"
    "App.objects.filter(name='chat').update(pii_redaction={on})\n"
)


@pytest.fixture
def redacting_chat(server: Server) -> Iterator[None]:
    server.shell(REDACTION.format(on=True))
    yield
    server.shell(REDACTION.format(on=False))


def test_the_title_made_from_the_first_message_is_redacted(
    redacting_chat, new_page, server: Server
):
    page = new_page()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("mail me at ada@lovelace.example about the trip")
    composer.press("Enter")
    expect(page.locator("#messages .entry-agent")).to_have_count(1)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()

    title = "mail me at [email] about the trip"
    expect(page.locator("#chat-title")).to_have_text(title)
    expect(page.locator(".session-item .session-name").first).to_have_text(title)
    page.reload()
    expect(page.locator("#chat-title")).to_have_text(title)
    expect(page.locator("#messages .entry-user .bubble-body")).to_have_text(title)
    page.get_by_role("searchbox", name="Search your chats").fill("lovelace")
    expect(page.locator("#search-status")).to_have_text("No chat or message matches.")

    page.goto(f"{server.base_url}/settings/")
    expect(page.get_by_text("replaces e-mail addresses, phone and card numbers")).to_be_visible()
