"""Fresh memories in a real browser (issue 13, items 1 and 6): leaving a chat for a new one
generates what was said there, a correction replaces what it contradicts, and the Memory page
shows what the memory was and why it changed.

A server of its own (``quick_server``, shared with test_memory_trust), whose quiet period after
leaving a chat is 2 seconds (the default is two minutes) and whose sweep runs every second, so the
test waits seconds, not minutes."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.server import Server, sign_in
from tests.browser.test_memory import open_memory_page, replies, send

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("quick_server")]

GENERATION_TIMEOUT_SECONDS = 45


@pytest.fixture
def quick_page(browser, quick_server) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list = []
    page.on("pageerror", lambda error: errors.append(error))
    sign_in(page, quick_server, quick_server.usernames[0])
    yield page
    context.close()
    print(quick_server.log_tail())
    assert errors == [], "uncaught errors in the page's scripts"


def _active_memories(server: Server, username: str) -> list[str]:
    script = (
        "from memory_app.models import Memory\n"
        f"for m in Memory.objects.filter(user__username={username!r}, status='active'):\n"
        "    print(m.text)\n"
    )
    return server.shell(script).splitlines()


def test_a_correction_in_a_chat_the_user_left_is_used_by_the_next_chat(
    quick_page: Page, quick_server: Server
):
    page = quick_page
    send(page, "My name is Dana and I live in Lisbon.")
    send(page, "Remember that my daughter's birthday is May 3rd.")
    send(page, "Actually I moved to Porto last month.")

    page.get_by_role("link", name="New chat").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    deadline = time.monotonic() + GENERATION_TIMEOUT_SECONDS
    while not any("Porto" in text for text in _active_memories(quick_server, "reader-00")):
        assert time.monotonic() < deadline, "the chat left behind was never generated"
        time.sleep(0.5)
    send(page, "Where do I live?")

    porto_replaced_lisbon(page, moved="last month")
    expect(page.locator(".memory-text", has_text="May 3rd")).to_have_count(1)


def porto_replaced_lisbon(page: Page, *, moved: str) -> None:
    """The last reply, to "Where do I live?", says Porto, and the Memory page holds Porto with
    Lisbon in its history and why it changed, no Lisbon left."""
    expect(replies(page).last).to_contain_text("Porto")
    expect(replies(page).last).not_to_contain_text("Lisbon")
    open_memory_page(page)
    porto = page.locator(".memory-item", has_text="live in Porto")
    expect(porto).to_have_count(1)
    expect(porto.locator(".memory-change")).to_contain_text("it was “you live in Lisbon”")
    expect(porto.locator(".memory-change")).to_contain_text(
        re.compile(
            rf"You said on \d{{1,2}} \w{{3}} that you live in Porto, having moved there {moved}"
        )
    )
    expect(page.locator(".memory-text", has_text="Lisbon")).to_have_count(0)


def test_a_correction_said_mid_sentence_reaches_the_page_the_profile_and_a_new_chat(
    quick_page: Page, quick_server: Server
):
    page = quick_page
    username = quick_server.usernames[0]
    send(page, "My name is Dana and I live in Gdansk.")
    leave_and_wait(page, quick_server, username, "Gdansk")

    send(page, "Quick update on my life: I actually moved to Wroclaw last month.")
    leave_and_wait(page, quick_server, username, "Wroclaw")
    send(page, "Where do I live these days?")

    expect(replies(page).last).to_contain_text("Wroclaw")
    expect(replies(page).last).not_to_contain_text("Gdansk")
    open_memory_page(page)
    profile = page.locator(".memory-profile")
    expect(profile).to_contain_text("Wroclaw")
    expect(profile).not_to_contain_text("Gdansk")
    moved = page.locator(".memory-item", has_text="live in Wroclaw")
    expect(moved).to_have_count(1)
    expect(moved.locator(".memory-change")).to_contain_text("it was “you live in Gdansk”")
    expect(page.locator(".memory-text", has_text="Gdansk")).to_have_count(0)


def leave_and_wait(page: Page, server: Server, username: str, word: str) -> None:
    """Leave the chat for a new one and wait until what was said there is remembered."""
    page.get_by_role("link", name="New chat").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    deadline = time.monotonic() + GENERATION_TIMEOUT_SECONDS
    while not any(word in text for text in _active_memories(server, username)):
        assert time.monotonic() < deadline, "the chat left behind was never generated"
        time.sleep(0.5)
