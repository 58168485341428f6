"""Memory a person can trust (issue 26), in Chromium against the embedded default: requests
leave no memory, a correction said in another chat replaces an explicit fact (kept in its
history) and the next chat answers with it, and what is said while creation is off is never
remembered, before or after creation is turned back on.

The server's quiet period after leaving a chat is 2 seconds, its sweep runs every second
(see ``test_memory_freshness``), so leaving a chat generates its memories within seconds."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.server import Server, sign_in
from tests.browser.test_memory import open_memory_page, replies, send
from tests.browser.test_memory_controls import back_to_chat, set_memory_setting
from tests.browser.test_memory_freshness import (
    GENERATION_TIMEOUT_SECONDS,
    porto_replaced_lisbon,
)

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("quick_server")]


@pytest.fixture
def page_of(browser, quick_server) -> Iterator:
    """A signed-in page for one of the server's users (each test its own)."""
    contexts = []

    def make(username: str) -> Page:
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        contexts.append(context)
        page = context.new_page()
        sign_in(page, quick_server, username)
        return page

    yield make
    for context in contexts:
        context.close()


def _generated_chats(server: Server, username: str) -> int:
    """How many of the user's chats a job of leaving them has finished with."""
    script = (
        "from memory_app.models import GenerationJob\n"
        f"print(GenerationJob.objects.filter(user__username={username!r}, trigger='session_left',"
        " status__in=['succeeded', 'skipped']).values('session_id').distinct().count())\n"
    )
    return int(server.shell(script).split()[-1])


def _every_memory(server: Server, username: str) -> list[str]:
    """Every memory of the user, whatever its status (quarantined, invalidated included)."""
    script = (
        "from memory_app.models import Memory\n"
        f"for m in Memory.objects.filter(user__username={username!r}):\n"
        "    print('memory:', m.text)\n"
    )
    lines = server.shell(script).splitlines()
    return [line.removeprefix("memory: ") for line in lines if line.startswith("memory: ")]


def _leave_and_wait(page: Page, server: Server, username: str, *, chats: int) -> None:
    """Open a new chat (the one left is generated after the quiet period) and wait until
    ``chats`` of the user's chats were generated."""
    page.get_by_role("link", name="New chat").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    deadline = time.monotonic() + GENERATION_TIMEOUT_SECONDS
    while _generated_chats(server, username) < chats:
        assert time.monotonic() < deadline, "the chat left behind was never generated"
        time.sleep(0.5)


def test_requests_leave_no_memory(page_of, quick_server: Server):
    username = quick_server.usernames[1]
    page = page_of(username)
    send(page, "Explain how photosynthesis works, step by step.")
    send(page, "Write a haiku about autumn leaves.")

    _leave_and_wait(page, quick_server, username, chats=1)

    assert _every_memory(quick_server, username) == []
    expect(page.locator("#chat-notices")).not_to_contain_text("Remembered")
    open_memory_page(page)
    expect(page.get_by_text("Nothing remembered yet")).to_be_visible()


def test_porto_replaces_an_explicit_lisbon_and_the_next_chat_knows(
    page_of,
    quick_server: Server,
):
    username = quick_server.usernames[2]
    page = page_of(username)
    send(page, "Remember that I live in Lisbon.")
    expect(replies(page).last).to_contain_text("you live in Lisbon")
    _leave_and_wait(page, quick_server, username, chats=1)

    send(page, "I moved to Porto last week.")
    _leave_and_wait(page, quick_server, username, chats=2)
    assert [text for text in _every_memory(quick_server, username) if "live" in text] == [
        "The user lives in Porto, having moved there last week."
    ]

    send(page, "Where do I live?")
    expect(replies(page).last).to_contain_text("I remember that you live in Porto")
    porto_replaced_lisbon(page, moved="last week")


def test_miso_said_while_creation_was_off_is_never_remembered(
    page_of,
    quick_server: Server,
):
    username = quick_server.usernames[3]
    page = page_of(username)
    set_memory_setting(page, "Create memories from my chats", on=False)
    back_to_chat(page)
    send(page, "Remember that my cat is called Miso.")
    expect(replies(page).last).to_contain_text("I have not saved that")
    send(page, "My cat Miso loves the sofa.")

    set_memory_setting(page, "Create memories from my chats", on=True)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Chat").click()
    page.locator("#session-list .session-item").first.click()
    send(page, "I play the cello.")
    _leave_and_wait(page, quick_server, username, chats=1)

    assert _every_memory(quick_server, username) == ["The user plays the cello."]
    send(page, "What is my cat called?")
    expect(replies(page).last).not_to_contain_text("Miso")
    open_memory_page(page)
    expect(page.locator(".memory-text", has_text="Miso")).to_have_count(0)
    expect(page.locator(".memory-text", has_text="cello")).to_have_count(1)
