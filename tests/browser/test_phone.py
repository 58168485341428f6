"""At phone width (390 px): no page scrolls sideways, the chat's title shows, the composer's
placeholder is whole on one line, and the navigation folds behind a Menu button that works by
keyboard."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import PHONE, WIDE
from tests.browser.server import Server

pytestmark = pytest.mark.browser

LONG_MESSAGE = (
    "Here is a long line: " + "x" * 200 + "\n\n```python\nprint('" + "y" * 120 + "')\n```\n\n"
    "| name | value | note |\n|---|---|---|\n| " + "z" * 90 + " | 2 | three |"
)


def overflow(page: Page) -> int:
    """How many pixels the page is wider than the window (0: no sideways scroll)."""
    return page.evaluate(
        "document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
    )


def chat_turn(page: Page, text: str, count: int) -> None:
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(page.locator("#messages .entry-user")).to_have_count(count)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()


def test_no_page_of_a_user_scrolls_sideways_and_the_chat_title_shows(new_page, server: Server):
    page = new_page(PHONE)
    chat_turn(page, "remember that my daughter's birthday is May 3rd", 1)
    chat_turn(page, LONG_MESSAGE, 2)
    title = page.get_by_role("heading", level=1)
    expect(title).to_have_text("remember that my daughter's birthday is May 3rd")
    expect(title).to_be_in_viewport(ratio=1)
    assert title.bounding_box()["width"] > 200
    assert overflow(page) == 0
    chat_url = page.url

    pages = [
        "/",
        "/memory/",
        "/memory/?q=birthday",
        "/memory/delete-all/",
        "/settings/",
        "/settings/delete/",
        "/access/",
        "/api/docs/",
        "/chat/deleted-long-ago/",
    ]
    scripted = ("/", "/api/docs/", "/chat/deleted-long-ago/")  # they fill in after loading
    for path in pages:
        page.goto(f"{server.base_url}{path}")
        page.wait_for_load_state("networkidle" if path in scripted else "load")
        assert overflow(page) == 0, path

    page.goto(chat_url)
    expect(page.locator("#messages .entry-agent")).to_have_count(2)
    assert overflow(page) == 0
    for toggle in ("Chats", "State & context"):
        page.get_by_role("button", name=toggle).click()
        assert overflow(page) == 0, toggle
        page.keyboard.press("Escape")


def test_no_page_of_the_sign_in_scrolls_sideways(browser: Browser, server: Server):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    for path in ("/accounts/login/", "/accounts/signup/", "/no-such-page/"):
        page.goto(f"{server.base_url}{path}")
        assert overflow(page) == 0, path
    context.close()


def test_the_menu_folds_the_navigation_and_works_by_keyboard(new_page, server: Server):
    page = new_page(PHONE)
    page.goto(f"{server.base_url}/settings/")
    menu = page.get_by_role("button", name="Menu")
    memory_link = page.get_by_role("navigation", name="Main").get_by_role("link", name="Memory")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(memory_link).to_be_hidden()

    menu.focus()
    page.keyboard.press("Enter")

    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(memory_link).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link").first).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_be_focused()
    expect(memory_link).to_be_hidden()

    menu.click()
    memory_link.click()
    expect(page).to_have_url(f"{server.base_url}/memory/")


def test_the_navigation_is_not_folded_on_a_wide_screen(new_page, server: Server):
    page = new_page()

    expect(page.get_by_role("button", name="Menu")).to_be_hidden()
    expect(
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Memory")
    ).to_be_visible()


@pytest.mark.parametrize("width", [320, 360, 390])
def test_the_composer_shows_its_whole_placeholder_on_a_phone(new_page, width: int):
    page = new_page({"width": width, "height": 740})
    composer = page.get_by_role("textbox", name="Message")
    expect(composer).to_be_visible()
    room, needed = composer.evaluate(
        """box => {
            const style = getComputedStyle(box);
            const context = document.createElement("canvas").getContext("2d");
            context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
            const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
            return [box.clientWidth - padding, context.measureText(box.placeholder).width];
        }"""
    )
    assert needed <= room, f"placeholder needs {needed:.0f} px, the box has {room:.0f} px"
    expect(page.get_by_role("button", name="Attach files")).to_be_visible()
    assert overflow(page) == 0


LINES_OF = """banner => {
    const style = getComputedStyle(banner);
    const inner = banner.clientHeight - parseFloat(style.paddingTop)
        - parseFloat(style.paddingBottom);
    return Math.round(inner / parseFloat(style.lineHeight));
}"""


@pytest.mark.parametrize("width", [320, 390])
def test_the_offline_banner_takes_one_line_on_a_phone_and_says_it_all_to_a_screen_reader(
    new_page, width: int
):
    page = new_page({"width": width, "height": 740})
    banner = page.get_by_role("note").filter(has_text="Offline model")

    expect(banner).to_be_visible()
    assert banner.evaluate(LINES_OF) == 1
    expect(banner.locator(".narrow-only")).to_have_text("(built in, no network).")
    expect(banner.locator(".narrow-only")).to_be_visible()
    # What is out of sight is still read out: the whole sentence, once.
    said = banner.evaluate(
        """banner => [...banner.querySelectorAll(":scope > :not([aria-hidden=true])")]
            .map((part) => part.textContent).join(" ")"""
    )
    assert "Set GEMINI_API_KEY, or LLM_PROVIDER=openai with" in " ".join(said.split())
    assert overflow(page) == 0


def test_the_offline_banner_says_it_all_on_a_wide_screen(new_page):
    page = new_page(WIDE)
    banner = page.get_by_role("note").filter(has_text="Offline model")

    expect(banner).to_contain_text("Replies come from the built-in")
    expect(banner).to_contain_text("to chat with a real model.")
    expect(banner.locator(".narrow-only")).to_be_hidden()
    assert banner.evaluate(LINES_OF) <= 2
