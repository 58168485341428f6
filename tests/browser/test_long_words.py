"""Long URLs and words wrap on every page (issue 30): the Memory page and the chat's state
panel stay as wide as the screen, at 1280, 390 and 320 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_chat_follow import LAPTOP, PHONE, SMALL_PHONE

pytestmark = pytest.mark.browser

URL = "https://example.com/" + "_".join(f"averylongpathsegment{n}" for n in range(12))
SCREENS = [
    pytest.param(LAPTOP, id="1280px"),
    pytest.param(PHONE, id="390px"),
    pytest.param(SMALL_PHONE, id="320px"),
]
NARROW_PX = 800
FITS = "document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"


def send(page: Page, text: str) -> None:
    """Send a message and wait for the whole reply: the Send button alone is visible before the
    first turn starts, and opening the new chat then closes any drawer opened meanwhile."""
    replies = page.locator("#messages .entry-agent .bubble-body")
    before = replies.count()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(replies).to_have_count(before + 1)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()


def inside(page: Page, outer: str, inner: str) -> bool:
    """Whether every ``inner`` element ends within ``outer``'s right edge."""
    return page.evaluate(
        """([outer, inner]) => {
          const box = document.querySelector(outer).getBoundingClientRect();
          return [...document.querySelectorAll(inner)].every(
            (node) => node.getBoundingClientRect().right <= box.right + 1);
        }""",
        [outer, inner],
    )


@pytest.mark.parametrize("viewport", SCREENS)
def test_a_memory_with_a_long_url_fits_the_memory_page(new_page, server, viewport):
    page = new_page(viewport)
    send(page, f"remember that my bookmark is {URL}")
    expect(page.locator("#chat-notices")).to_contain_text("Remembered: ")

    page.goto(f"{server.base_url}/memory/")

    expect(page.locator(".memory-item", has_text="averylongpathsegment0")).to_be_visible()
    assert page.evaluate(FITS), "the Memory page scrolls sideways"
    assert inside(page, "main", ".memory-item")


@pytest.mark.parametrize("viewport", SCREENS)
def test_a_long_url_in_the_state_stays_in_the_panel(new_page, viewport):
    page = new_page(viewport)
    send(page, f"set homepage to {URL}")
    toggle = page.get_by_role("button", name="State & context")
    if viewport["width"] <= NARROW_PX:  # the panel is a closed drawer there
        expect(toggle).to_have_attribute("aria-expanded", "false")
        toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    panel = page.get_by_role("complementary", name="State and context")
    expect(panel).to_contain_text("averylongpathsegment11")

    assert inside(page, "#chat-panel", "#state-view *")
    assert page.evaluate(FITS)
