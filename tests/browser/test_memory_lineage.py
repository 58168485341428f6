"""What a person takes back is taken back, in a real browser on the embedded default (issue
41): Lisbon then Porto in two chats, the Porto chat deleted, and the Memory page, the profile
and a new chat's answer all say Lisbon again; "forget that my sister lives in Braga" leaves no
memory about Braga, and the reply says so.

On ``quick_server`` (shared with test_memory_freshness and test_memory_trust), whose chats are
generated seconds after they are left."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.server import Server, sign_in
from tests.browser.test_memory import open_memory_page, replies, send
from tests.browser.test_memory_trust import (
    GENERATION_TIMEOUT_SECONDS,
    _every_memory,
    _leave_and_wait,
)

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("quick_server")]


@pytest.fixture
def page_of(browser, quick_server) -> Iterator:
    """A signed-in page for one of the server's users (each test its own)."""
    contexts = []
    errors: list = []

    def make(username: str) -> Page:
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(error))
        sign_in(page, quick_server, username)
        return page

    yield make
    for context in contexts:
        context.close()
    print(quick_server.log_tail())
    assert errors == [], "uncaught errors in the page's scripts"


def _active(server: Server, username: str) -> list[str]:
    script = (
        "from memory_app.models import Memory\n"
        f"for m in Memory.objects.filter(user__username={username!r}, status='active'):\n"
        "    print(m.text)\n"
    )
    return server.shell(script).splitlines()


def _wait_for(server: Server, username: str, wanted: list[str]) -> None:
    deadline = time.monotonic() + GENERATION_TIMEOUT_SECONDS
    while _active(server, username) != wanted:
        assert time.monotonic() < deadline, _active(server, username)
        time.sleep(0.5)


def test_deleting_the_porto_chat_brings_lisbon_back_everywhere(page_of, quick_server: Server):
    username = quick_server.usernames[10]
    page = page_of(username)
    send(page, "I live in Lisbon.")
    _leave_and_wait(page, quick_server, username, chats=1)
    send(page, "I moved to Porto.")
    _leave_and_wait(page, quick_server, username, chats=2)
    assert _active(quick_server, username) == ["The user lives in Porto, having moved there."]

    porto_chat = page.locator("#session-list .session-item", has_text="Porto")
    porto_chat.get_by_role("button", name=re.compile("^Delete")).click()
    dialog = page.get_by_role("dialog", name="Delete this chat?")
    expect(dialog).to_contain_text("derived again")
    dialog.get_by_role("button", name="Delete").click()
    expect(page.locator("#session-list .session-item", has_text="Porto")).to_have_count(0)

    _wait_for(quick_server, username, ["The user lives in Lisbon."])
    open_memory_page(page)
    lisbon = page.locator(".memory-item", has_text="live in Lisbon")
    expect(lisbon).to_have_count(1)
    expect(page.locator(".memory-text", has_text="Porto")).to_have_count(0)
    expect(lisbon).to_contain_text("Derived again")
    expect(page.locator(".memory-profile")).to_contain_text("Lisbon")
    expect(page.locator(".memory-profile")).not_to_contain_text("Porto")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Chat").click()
    page.get_by_role("link", name="New chat").click()
    send(page, "Where do I live?")
    expect(replies(page).last).to_contain_text("Lisbon")
    expect(replies(page).last).not_to_contain_text("Porto")


def test_forget_that_my_sister_lives_in_braga(page_of, quick_server: Server):
    username = quick_server.usernames[11]
    page = page_of(username)
    send(page, "Remember that my sister lives in Braga.")
    expect(replies(page).last).to_contain_text("your sister lives in Braga")

    send(page, "Forget that my sister lives in Braga.")

    expect(replies(page).last).to_contain_text("I've forgotten that your sister lives in Braga")
    assert not [text for text in _active(quick_server, username) if "Braga" in text]
    send(page, "What do you know about me?")
    expect(replies(page).last).not_to_contain_text("Braga")
    _leave_and_wait(page, quick_server, username, chats=1)
    assert not [text for text in _every_memory(quick_server, username) if "Braga" in text]
