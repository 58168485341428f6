"""What every page of the site has, in a real browser at 1280 and 390 px: the site's own error
pages with DEBUG off (as `make run` serves), a favicon, a skip link, and a light/dark switch
that is remembered."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PHONE, WIDE
from tests.browser.server import Server

pytestmark = pytest.mark.browser

SCREENS = [pytest.param(WIDE, id="1280px"), pytest.param(PHONE, id="390px")]

BACKGROUND = "getComputedStyle(document.body).backgroundColor"
LIGHT_BACKGROUND = "rgb(246, 247, 249)"
DARK_BACKGROUND = "rgb(18, 21, 27)"


def fits_the_width(page: Page) -> bool:
    """Whether the page scrolls sideways."""
    return page.evaluate(
        "document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"
    )


def navigation(page: Page):
    """The main navigation, unfolded first on a phone (behind its Menu button there)."""
    menu = page.get_by_role("button", name="Menu")
    if menu.is_visible() and menu.get_attribute("aria-expanded") == "false":
        menu.click()
    return page.get_by_role("navigation", name="Main")


def theme_switch(page: Page):
    """The light/dark switch, named for the theme it turns the page to."""
    return navigation(page).locator("#theme-toggle")


@pytest.mark.parametrize("viewport", SCREENS)
def test_a_deleted_chat_shows_the_sites_not_found_page(new_page, server: Server, viewport):
    page = new_page(viewport)

    response = page.goto(f"{server.base_url}/chat/no-such-chat/")

    assert response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("We couldn\u2019t find that page")
    expect(page.get_by_text("URLconf")).to_have_count(0)
    expect(navigation(page)).to_contain_text("Memory")
    assert page.evaluate(BACKGROUND) in (LIGHT_BACKGROUND, DARK_BACKGROUND), "no stylesheet"
    assert fits_the_width(page)

    page.get_by_role("link", name="Start a new chat").click()

    expect(page).to_have_url(f"{server.base_url}/")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()


def test_the_api_answers_json_for_an_unknown_address(new_page, server: Server):
    page = new_page()

    response = page.request.get(f"{server.base_url}/api/no-such-thing/")

    assert response.status == 404
    assert response.json() == {"detail": "Not found."}


@pytest.mark.parametrize("path", ["/", "/memory/", "/settings/", "/access/", "/api/docs/"])
def test_every_page_has_an_icon_and_no_request_of_it_fails(new_page, server: Server, path):
    page = new_page()
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)

    page.goto(f"{server.base_url}{path}")
    page.wait_for_load_state("networkidle")

    assert failed == []
    icon = page.locator("link[rel~=icon]").first.get_attribute("href")
    assert page.request.get(f"{server.base_url}{icon}" if icon.startswith("/") else icon).ok


def test_the_icon_is_served_where_browsers_look_for_it_by_default(server: Server):
    """Pages without an icon link (the admin's) make browsers ask for /favicon.ico."""
    with urllib.request.urlopen(f"{server.base_url}/favicon.ico") as response:
        assert response.status == 200
        assert response.headers["Content-Type"] in ("image/x-icon", "image/vnd.microsoft.icon")


def test_the_error_page_for_an_unknown_address_is_not_djangos(server: Server):
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{server.base_url}/chat/")
    body = raised.value.read().decode()

    assert raised.value.code == 404
    assert "We couldn\u2019t find that page" in body
    assert "Using the URLconf" not in body


@pytest.mark.parametrize("viewport", SCREENS)
def test_the_skip_link_is_the_first_stop_and_jumps_to_the_content(
    new_page, server: Server, viewport
):
    page = new_page(viewport)
    page.goto(f"{server.base_url}/settings/")

    page.keyboard.press("Tab")

    skip = page.get_by_role("link", name="Skip to main content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Create memories from my chats")).to_be_focused()


@pytest.mark.parametrize("viewport", SCREENS)
def test_the_theme_switch_overrides_the_system_and_is_remembered(
    new_page, server: Server, viewport
):
    page = new_page(viewport, color_scheme="light")
    switch = theme_switch(page)
    expect(switch).to_have_text("Dark theme")
    assert page.evaluate(BACKGROUND) == LIGHT_BACKGROUND

    switch.click()

    expect(switch).to_have_text("Light theme")
    assert page.evaluate(BACKGROUND) == DARK_BACKGROUND
    page.goto(f"{server.base_url}/memory/")
    expect(theme_switch(page)).to_have_text("Light theme")
    assert page.evaluate(BACKGROUND) == DARK_BACKGROUND
    page.reload()
    assert page.evaluate(BACKGROUND) == DARK_BACKGROUND

    theme_switch(page).click()

    assert page.evaluate(BACKGROUND) == LIGHT_BACKGROUND
    page.goto(f"{server.base_url}/settings/")
    assert page.evaluate(BACKGROUND) == LIGHT_BACKGROUND


def test_the_theme_follows_the_system_until_one_is_chosen(new_page, server: Server):
    page = new_page(color_scheme="dark")

    expect(page.get_by_role("button", name="Light theme")).to_be_visible()
    assert page.evaluate(BACKGROUND) == DARK_BACKGROUND
    page.get_by_role("button", name="Light theme").click()
    assert page.evaluate(BACKGROUND) == LIGHT_BACKGROUND
    page.emulate_media(color_scheme="dark")
    page.reload()
    assert page.evaluate(BACKGROUND) == LIGHT_BACKGROUND


def test_the_choice_reaches_the_admin_which_keeps_the_same_setting(new_page, server: Server):
    page = new_page(color_scheme="light")
    page.get_by_role("button", name="Dark theme").click()

    page.goto(f"{server.base_url}/admin/login/")

    expect(page.locator("html")).to_have_attribute("data-theme", "dark")


def test_the_switch_and_the_links_show_where_the_keyboard_is(new_page, server: Server):
    page = new_page()
    page.goto(f"{server.base_url}/settings/")
    switch = page.locator("#theme-toggle")

    switch.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")

    expect(switch).to_be_focused()
    assert switch.evaluate("node => getComputedStyle(node).outlineStyle") == "solid"
    said = switch.inner_text()
    page.keyboard.press("Enter")
    expect(switch).not_to_have_text(said)


@pytest.mark.parametrize("viewport", SCREENS)
def test_the_api_reference_is_one_click_away_and_describes_each_part(
    new_page, server: Server, viewport
):
    page = new_page(viewport)

    navigation(page).get_by_role("link", name="API").click()

    expect(page).to_have_url(f"{server.base_url}/api/docs/")
    for part in ("Sessions", "Memories", "Memory settings", "Access", "Export", "Apps"):
        expect(page.locator(".opblock-tag", has_text=part).first).to_be_visible()
    expect(page.get_by_text("Another user's object answers")).to_be_visible()
