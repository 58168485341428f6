"""The chat page's view: who may open which chat, and what it tells the scripts."""

import json
import re

import pytest
from django.urls import reverse

from sessions_app import services


@pytest.fixture
def session(user):
    created = services.session_create(app_name="chat", user_id=str(user.pk))
    services.session_rename(user_pk=user.pk, session_id=created.id, title="Trip <plans>")
    return created


def chat_config(response) -> dict:
    return json.loads(
        response.content.decode()
        .split('id="chat-config" type="application/json">')[1]
        .split("</script>")[0]
    )


@pytest.mark.django_db
def test_the_chat_needs_a_signed_in_user(client):
    response = client.get(reverse("home"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_home_is_a_new_chat(client, user):
    client.force_login(user)

    response = client.get(reverse("home"))

    assert response.status_code == 200
    config = chat_config(response)
    assert config["session_id"] is None
    assert config["sessions_url"] == "/api/sessions/"
    assert config["socket_path_template"] == "/ws/chat/session-id/"
    assert "Start a conversation" in response.content.decode()


def test_a_chat_of_ones_own_opens_with_its_title_escaped(client, user, session):
    client.force_login(user)

    response = client.get(reverse("chat-session", kwargs={"session_id": session.id}))

    assert response.status_code == 200
    assert chat_config(response)["session_id"] == session.id
    page = response.content.decode()
    assert "<title>Trip &lt;plans&gt; · Chat · Agent memory</title>" in page
    assert "Trip <plans>" not in page


def test_another_users_chat_and_an_unknown_one_answer_404(client, other_user, session):
    client.force_login(other_user)

    assert client.get(reverse("chat-session", kwargs={"session_id": session.id})).status_code == 404
    assert client.get(reverse("chat-session", kwargs={"session_id": "nope"})).status_code == 404


def _banners(client) -> dict[str, bool]:
    """Which of the chat page's two model banners shows (the other one is hidden)."""
    page = client.get(reverse("home")).content.decode()
    return {
        name: " hidden" not in re.search(rf'<p class="{name}" [^>]*>', page).group(0)
        for name in ("offline-banner", "model-banner")
    }


def test_the_offline_banner_shows_only_without_gemini(client, user, settings):
    client.force_login(user)
    settings.GEMINI_API_KEY = ""
    assert _banners(client) == {"offline-banner": True, "model-banner": False}

    settings.GEMINI_API_KEY = "test-key"
    assert _banners(client) == {"offline-banner": False, "model-banner": True}


def test_the_chat_page_names_the_model_that_answers(client, user, settings):
    client.force_login(user)
    settings.LLM_PROVIDER = "openai"
    settings.OPENAI_BASE_URL = "http://127.0.0.1:11434/v1"
    settings.LLM_MODEL = "llama3.2"

    page = client.get(reverse("home")).content.decode()

    assert '<span id="model-label">llama3.2 (OpenAI-compatible server)</span>' in page
    assert _banners(client) == {"offline-banner": False, "model-banner": True}
