"""The Memory page's search ranks a memory that holds the searched word first (issue 46, item
6), at 1280 and 390 px, light and dark: "allergy" shows the peanut allergy above the more recent
radiologist, whom the embedding model puts first by meaning, and axe-core finds no serious
violation in the results.

The server embeds memories through an OpenAI-compatible embedding server, the fake one
answering as a crude model of meaning would (``MedicalEmbeddings``): "allergy" and a
radiologist are both medicine, "allergic" is not on its list."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import PHONE, WIDE
from tests.browser.server import Server, running_server, sign_in
from tests.browser.test_accessibility import serious_violations
from tests.browser.test_asking_first import add_memory
from tests.fake_openai import FakeOpenAI

pytestmark = pytest.mark.browser

SCREENS = [pytest.param(WIDE, id="1280px"), pytest.param(PHONE, id="390px")]
ALLERGY = "My sister Ola is allergic to peanuts."
RADIOLOGIST = "My partner Marek works as a radiologist."
# How long the memories' embedding, done after each is saved, may take on a busy machine (not
# an assertion).
EMBEDDING_TIMEOUT_SECONDS = 45
EMBEDDED = """
from memory_app.models import Memory
print(Memory.objects.filter(user__username={username!r}, embedding__isnull=False).count())
"""
BY_MEANING = """
from django.contrib.auth import get_user_model
from memory_app.selectors import memory_search
user = get_user_model().objects.get(username={username!r})
for result in memory_search(app_name="chat", user_pk=user.pk, query="allergy"):
    print(result.text)
"""


class MedicalEmbeddings(FakeOpenAI):
    """Vectors as a crude model of meaning: how many medical words a text holds, beside a
    small constant, so that every text has a direction."""

    MEDICINE = frozenset({"allergy", "radiologist", "doctor"})

    def embedding(self, text: str) -> list[float]:
        words = set(re.findall(r"\w+", text.lower()))
        return [float(len(words & self.MEDICINE)), 0.01]


@pytest.fixture(scope="module")
def embedding_server() -> Iterator[FakeOpenAI]:
    server = MedicalEmbeddings().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def meaning_server(tmp_path_factory, embedding_server: FakeOpenAI) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("daphne-meaning"),
        extra_env={
            "MEMORY_EMBEDDER": "openai",
            "MEMORY_OPENAI_EMBEDDING_MODEL": "medical",
            # The chat's server, which embeddings use when they have none of their own; the
            # chat stays on the offline model (LLM_PROVIDER is not openai).
            "OPENAI_BASE_URL": embedding_server.url,
            "NO_PROXY": "127.0.0.1,localhost",
        },
    ) as running:
        yield running


@pytest.fixture
def page_at(browser: Browser, meaning_server: Server) -> Iterator:
    """A signed-in page at ``viewport`` in ``scheme``, for a user of its own."""
    contexts = []
    users = iter(meaning_server.usernames)

    def make(viewport: dict, scheme: str) -> tuple[Page, str]:
        context = browser.new_context(viewport=viewport, color_scheme=scheme)
        contexts.append(context)
        page = context.new_page()
        username = next(users)
        sign_in(page, meaning_server, username)
        return page, username

    yield make
    for context in contexts:
        context.close()
    print(meaning_server.log_tail())


def embedded(server: Server, username: str, count: int) -> None:
    """Wait until ``count`` of the user's memories have their vectors."""
    deadline = time.monotonic() + EMBEDDING_TIMEOUT_SECONDS
    while int(server.shell(EMBEDDED.format(username=username)).strip()) < count:
        assert time.monotonic() < deadline, "the memories were never embedded"
        time.sleep(0.5)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", SCREENS)
def test_a_memory_holding_the_word_comes_before_a_recent_one_found_by_meaning(
    page_at, meaning_server: Server, viewport, scheme
):
    page, username = page_at(viewport, scheme)
    add_memory(page, meaning_server, ALLERGY)
    add_memory(page, meaning_server, RADIOLOGIST)
    embedded(meaning_server, username, 2)
    by_meaning = meaning_server.shell(BY_MEANING.format(username=username)).splitlines()
    assert "radiologist" in by_meaning[0], "what the assistant's retrieval puts first"

    page.get_by_role("searchbox", name="Search memories").fill("allergy")
    page.get_by_role("button", name="Search").click()

    expect(page.get_by_role("heading", name="2 results for “allergy”")).to_be_visible()
    expect(page.locator(".memory-text")).to_have_text(
        ["Your sister Ola is allergic to peanuts.", "Your partner Marek works as a radiologist."]
    )
    violations = serious_violations(page, scripted=False)
    assert violations == [], json.dumps(violations, indent=1)
