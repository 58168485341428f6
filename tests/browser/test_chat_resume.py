"""Reloading the chat while a reply is being written (issue 30): the reply goes on where it
is, from the words already written, as in ChatGPT's and Claude's web apps; and the server
logs no failed turn. At the walk's screens: 1280x800, 390x844 and 320x640."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_chat_follow import SCREENS

pytestmark = pytest.mark.browser

WORDS = 400
# Shown once the reply is under way, early in its 400 words (about 7 s at the test server's
# pace): the reload comes while most of it is still to be written however busy the machine,
# rather than a fixed time after sending, which on a busy machine left too little of it.
UNDER_WAY = "word9 word10"


def reply(page: Page):
    return page.locator("#messages .entry-agent .bubble-body")


def words_shown(page: Page) -> int:
    return len((reply(page).first.text_content() or "").split())


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_a_reload_mid_reply_streams_on_from_where_it_was(new_page, server, viewport, scheme):
    # The server is shared by the worker's browser tests: only what it logs from here counts.
    log_start = server.log_path.stat().st_size
    page = new_page(viewport, color_scheme=scheme)
    text = " ".join(f"word{n}" for n in range(WORDS))
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(page.locator("#messages .entry-agent.streaming")).to_contain_text(UNDER_WAY)
    written = words_shown(page)

    page.reload()

    streaming = page.locator("#messages .entry-agent.streaming")
    expect(streaming).to_be_visible()
    expect(streaming).to_contain_text(f"word{written}")
    shown_after_reload = words_shown(page)
    assert shown_after_reload >= written, "the reply went back to its start"
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_visible(timeout=60_000)
    expect(reply(page)).to_have_count(1)
    expect(reply(page)).to_have_text(f"You said: \u201c{text}\u201d.")
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)
    expect(page.get_by_text("being written elsewhere")).to_have_count(0)
    log = server.log_path.read_bytes()[log_start:].decode(errors="replace")
    assert "chat turn failed" not in log
    assert "Traceback" not in log

    page.reload()
    expect(reply(page)).to_have_text(f"You said: \u201c{text}\u201d.")


def test_stop_after_a_reload_stops_the_reply(new_page):
    page = new_page()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(" ".join(f"word{n}" for n in range(WORDS)))
    composer.press("Enter")
    expect(page.locator("#messages .entry-agent.streaming")).to_contain_text(UNDER_WAY)
    page.reload()
    expect(page.locator("#messages .entry-agent.streaming")).to_be_visible()

    page.get_by_role("button", name="Stop").click()

    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    stopped_at = words_shown(page)
    assert stopped_at < WORDS, "the reply ran to its end"
    page.reload()
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    assert words_shown(page) == stopped_at
