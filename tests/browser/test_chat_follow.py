"""The chat as a new user walks it (issue 30): the newest reply in view, the toolbar's title,
status and theme switch, one way to run a stopped reply again, Attach and Send apart; at
1280x800, 390x844 and 320x640, light and dark."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SMALL_PHONE = {"width": 320, "height": 640}
SCREENS = [
    pytest.param(LAPTOP, "light", id="1280px-light"),
    pytest.param(PHONE, "dark", id="390px-dark"),
    pytest.param(SMALL_PHONE, "light", id="320px-light"),
]
DISTANCE_TO_BOTTOM = (
    "() => { const c = document.getElementById('conversation');"
    " return c.scrollHeight - c.scrollTop - c.clientHeight; }"
)
SETTLE_SECONDS = 5


def at_the_bottom(page: Page) -> bool:
    """Whether the conversation ends at the bottom of its view, once the page has settled
    (a reply's buttons and layout come a frame or two after its last words)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while page.evaluate(DISTANCE_TO_BOTTOM) >= 2:
        if time.monotonic() > deadline:
            return False
        page.wait_for_timeout(100)
    return True


def send(page: Page, text: str) -> None:
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")


def replies(page: Page):
    return page.locator("#messages .entry-agent .bubble-body")


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_each_new_reply_ends_in_view(new_page, viewport, scheme):
    page = new_page(viewport, color_scheme=scheme)

    for n in range(4):
        text = f"Reply {n}: " + " ".join(f"line{n}-{word}" for word in range(60))
        send(page, text)
        expect(replies(page)).to_have_count(n + 1)
        expect(replies(page).nth(n)).to_have_text(f"You said: \u201c{text}\u201d.")
        expect(page.get_by_role("button", name="Send")).to_be_visible()
        assert at_the_bottom(page), f"reply {n} ends {page.evaluate(DISTANCE_TO_BOTTOM)} px down"
        expect(replies(page).nth(n)).to_be_in_viewport()
    expect(page.get_by_role("button", name="Jump to latest")).to_be_hidden()


def test_reading_back_up_is_left_alone_until_jump_to_latest(new_page):
    page = new_page(LAPTOP)
    send(page, "First: " + " ".join(f"early{n}" for n in range(120)))
    expect(page.get_by_role("button", name="Send")).to_be_visible()

    send(page, " ".join(f"word{n}" for n in range(400)))
    expect(page.locator("#messages .entry-agent.streaming")).to_be_visible()
    page.locator("#conversation").hover()
    page.mouse.wheel(0, -3000)
    jump = page.get_by_role("button", name="Jump to latest")
    expect(jump).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_visible(timeout=60_000)

    assert page.evaluate(DISTANCE_TO_BOTTOM) > 200, "the view was pulled down while reading"
    jump.click()

    assert at_the_bottom(page)
    expect(jump).to_be_hidden()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_a_long_title_is_not_squeezed_by_the_connection_status(new_page, viewport, scheme):
    page = new_page(viewport, color_scheme=scheme)
    send(page, "Server start-up takes a minute after a deploy, why?")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    title = page.get_by_role("heading", level=1)
    expect(title).to_have_text("Server start-up takes a minute after a deploy, why?")

    expect(page.get_by_role("status").filter(has_text="Connected")).to_be_attached()

    shown = title.evaluate("node => node.clientWidth / node.scrollWidth")
    assert shown > 0.6 or title.evaluate("n => n.clientWidth") > 220, "the title is squeezed"


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_the_theme_switch_says_what_it_switches_to(new_page, viewport, scheme):
    page = new_page(viewport, color_scheme=scheme)
    menu = page.get_by_role("button", name="Menu")
    if menu.is_visible():
        menu.click()
    other = "Light theme" if scheme == "dark" else "Dark theme"
    same = "Dark theme" if scheme == "dark" else "Light theme"

    page.get_by_role("button", name=other).click()

    expect(page.get_by_role("button", name=same)).to_be_visible()
    expect(page.get_by_role("button", name=other)).to_have_count(0)


def test_a_stopped_reply_offers_retry_and_not_regenerate_too(new_page):
    page = new_page(LAPTOP)
    send(page, " ".join(f"word{n}" for n in range(300)))
    expect(page.locator("#messages .entry-agent.streaming")).to_be_visible()

    page.get_by_role("button", name="Stop").click()

    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.get_by_role("button", name="Regenerate")).to_have_count(0)
    page.reload()
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.get_by_role("button", name="Regenerate")).to_have_count(0)


@pytest.mark.parametrize(("viewport", "scheme"), SCREENS)
def test_attach_and_send_stand_apart(new_page, viewport, scheme):
    page = new_page(viewport, color_scheme=scheme)
    attach = page.get_by_role("button", name="Attach files").bounding_box()
    send_button = page.get_by_role("button", name="Send").bounding_box()

    assert send_button["x"] - (attach["x"] + attach["width"]) >= 4, "the two buttons touch"
