"""Sign-in with wrong passwords (issue 30): each try says how many are left before the lockout
and what happens then; a right password still signs in. At 1280, 390 and 320 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.server import Server
from tests.browser.test_chat_follow import LAPTOP, PHONE, SMALL_PHONE

pytestmark = pytest.mark.browser

LIMIT = 10  # SIGNIN_FAILURE_LIMIT's default
LOCK_MINUTES = 15


@pytest.mark.parametrize(
    ("viewport", "tries"),
    [
        pytest.param(LAPTOP, 6, id="1280px"),
        pytest.param(PHONE, 3, id="390px"),
        pytest.param(SMALL_PHONE, 3, id="320px"),
    ],
)
def test_each_wrong_password_says_how_many_tries_are_left(
    browser: Browser, server: Server, usernames, viewport, tries
):
    username = next(usernames)
    # A wrong password typed by another test on this server counts against the same address.
    server.shell("from django.core.management import call_command\ncall_command('axes_reset')")
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.goto(f"{server.base_url}/accounts/login/")
    said = []

    for n in range(1, tries + 1):
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(f"not-the-password-{n}")
        page.get_by_role("button", name="Sign in").click()
        error = page.locator(".errorlist")
        expect(error).to_contain_text(f"{LIMIT - n} tries left")
        said.append(error.inner_text())

    assert len(set(said)) == tries, said
    assert f"locked for {LOCK_MINUTES} minutes" in said[-1]
    assert page.evaluate(
        "document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"
    )
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    context.close()
