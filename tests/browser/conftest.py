"""Fixtures of the browser tests: a daphne server, Chromium, and a signed-in chat page."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.browser.server import CHROMIUM, CHROMIUM_ARGS, Server, running_server, sign_in

EXPECT_TIMEOUT_MS = 15_000
# How long background memory generation may take to show, on a machine busy with the rest of
# the suite (not an assertion): as the tests that wait for it allow.
GENERATION_TIMEOUT_SECONDS = 45
WIDE = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("daphne")) as running:
        yield running


@pytest.fixture(scope="session")
def quick_server(tmp_path_factory) -> Iterator[Server]:
    """A server whose memories are generated seconds after a chat is left: its quiet period
    after leaving a chat is 2 seconds (the default is two minutes) and its sweep runs every
    second. The modules that use it share an xdist group, so one worker starts it once."""
    with running_server(
        tmp_path_factory.mktemp("daphne-quick"),
        chunk_delay=0.01,
        extra_env={
            "MEMORY_TRIGGER_SESSION_LEFT_SECONDS": "2",
            "MEMORY_SESSION_LEFT_SCAN_SECONDS": "1",
            "MEMORY_EMBEDDER": "none",
        },
    ) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium, for one test module at a time: Playwright's sync API holds a running event
    loop while it is started, which the async tests that run later must not find."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium is not installed at {CHROMIUM}: `make test` installs it "
            "(or run `apt-get install -y chromium-headless-shell`)."
        )
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def usernames(server: Server) -> Iterator[str]:
    """Each test signs in as a user of its own, so no test sees another test's chats."""
    return iter(server.usernames)


@pytest.fixture
def new_page(browser: Browser, server: Server, usernames) -> Iterator:
    """Make signed-in pages (``viewport`` and other ``options`` of a browser context as
    Playwright takes them, e.g. ``color_scheme``); each fails its test on an uncaught script
    error. The server's log is printed, and so shown, when a test fails."""
    contexts = []
    errors: list = []
    violations: list[str] = []

    def make(viewport: dict | None = None, **options) -> Page:
        context = browser.new_context(viewport=viewport or WIDE, **options)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(error))
        csp_violations_collect(page, violations)
        sign_in(page, server, next(usernames))
        return page

    yield make
    for context in contexts:
        context.close()
    print(server.log_tail())
    assert errors == [], "uncaught errors in the page's scripts"
    assert violations == [], "the pages broke their Content-Security-Policy"


def csp_violations_collect(page: Page, violations: list[str]) -> None:
    """Collect what the browser reports as breaking the page's Content-Security-Policy (it
    logs every violation to the console, and sends a ``securitypolicyviolation`` event)."""
    page.add_init_script(
        """document.addEventListener("securitypolicyviolation", (event) => {
          console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
        });"""
    )

    def seen(message) -> None:
        if "Content Security Policy" in message.text or "CSP violation" in message.text:
            violations.append(message.text)

    page.on("console", seen)


@pytest.fixture
def chat_page(new_page) -> Page:
    """A signed-in chat page on a wide screen."""
    return new_page()
